"""The suite. faulthandler is enabled here, before anything imports logstore, so that logstore's
SIGBUS guard (native/guard.c, installed when logstore._native loads) sits above faulthandler's
handler and hands it the faults that are not its own. Enabled after logstore, as pytest's plugin
would do in pytest_configure, faulthandler would take every SIGBUS first and end the run on a
mapped-read fault that the guard turns into an error."""

import faulthandler

faulthandler.enable()
