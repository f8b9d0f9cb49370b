"""The broker's configuration: static (server.properties), dynamic, legacy topic keys, GROUP resources."""
