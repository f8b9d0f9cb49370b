"""The web console in a real browser: Debian's chromium, headless, driven by selenium through chromium-driver.

One walk through the console as two people on a cluster with SCRAM users and
ACLs (tests/console/conftest.py): ``admin`` logs in, creates a topic, produces
a message with a header, finds it by that header, reads an Avro value decoded through the
schema registry, watches a group's lag grow
on the live chart, resets it with a preview, and logs out; ``dave`` logs in and
is refused (the broker's authorization error on the page) what his ACLs do not
allow. A screenshot of each page goes to ``$LOGSTORE_ARTIFACTS/console/`` (or
/tmp/logstore-artifacts/console/); docs/console.md shows the main ones.

The tests skip, saying so, only when chromium, chromium-driver or selenium is
missing (``make test`` installs all three).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from logstore.client import Consumer, Producer, TopicPartition
from logstore.client.admin import AdminClient, ConsumerGroupTopicPartitions, NewTopic
from logstore.client.serdes import AvroSerializer, SchemaRegistryClient, SerializationContext
from logstore.console import ConsoleSettings
from tests.console.conftest import PASSWORDS, SaslBroker
from tests.kit.consolekit import ConsoleServer

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the test extra installs it
    webdriver = None

if webdriver is None or CHROMIUM is None or DRIVER is None:
    missing = [name for name, found in (("selenium (pip install -e '.[test]')", webdriver),
                                        ("chromium (apt-get install chromium)", CHROMIUM),
                                        ("chromium-driver (apt-get install chromium-driver)", DRIVER)) if found is None]  # fmt: skip
    pytest.skip(f"the browser tests need {', '.join(missing)}; `make test` installs them", allow_module_level=True)

WAIT_S = 30.0
DESKTOP = (1280, 900)
PHONE = (390, 844)


def artifacts() -> pathlib.Path:
    root = pathlib.Path(os.environ.get("LOGSTORE_ARTIFACTS") or "/tmp/logstore-artifacts") / "console"
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={DESKTOP[0]},{DESKTOP[1]}", "--disable-extensions", "--no-first-run",
                "--password-store=basic"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


class Walk:
    """The browser on the console: go to pages, fill forms, wait, take screenshots."""

    def __init__(self, driver: WebDriver, base: str) -> None:
        self.driver = driver
        self.base = base
        self.shots: list[pathlib.Path] = []

    def go(self, path: str) -> None:
        self.driver.get(self.base + path)

    def find(self, css: str) -> Any:
        return WebDriverWait(self.driver, WAIT_S).until(lambda d: d.find_element(By.CSS_SELECTOR, css))

    def fill(self, fields: dict[str, str]) -> None:
        for css, value in fields.items():
            element = self.find(css)
            if element.tag_name == "select":
                Select(element).select_by_visible_text(value)
            else:
                element.clear()
                element.send_keys(value)

    def click(self, css: str) -> None:
        self.find(css).click()

    def submit(self, css: str) -> None:
        """Click a form's button and wait for the next page to replace this one."""
        self.driver.execute_script("window.__old_page = true;")  # gone once the next page loads
        self.find(css).click()
        try:
            WebDriverWait(self.driver, WAIT_S, poll_frequency=0.1).until(
                lambda d: d.execute_script("return document.readyState === 'complete' && !window.__old_page"))
        except TimeoutException:
            raise AssertionError(f"clicking {css} did not load a page within {WAIT_S} s") from None

    def text(self, css: str = "body") -> str:
        return str(self.find(css).text)

    def wait_text(self, css: str, predicate: Callable[[str], bool], what: str) -> str:
        try:
            WebDriverWait(self.driver, WAIT_S, poll_frequency=0.2,
                          ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(
                lambda d: predicate(d.find_element(By.CSS_SELECTOR, css).text))  # fmt: skip
        except TimeoutException:
            raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}; the page says: "
                                 f"{self.text()[:1500]}") from None  # fmt: skip
        return self.text(css)

    def shot(self, name: str, size: tuple[int, int] = DESKTOP) -> pathlib.Path:
        self.driver.set_window_size(*size)
        height = self.driver.execute_script("return Math.min(document.documentElement.scrollHeight, 3000)")
        self.driver.set_window_size(size[0], max(size[1], int(height) + 140))
        path = artifacts() / f"{name}.png"
        assert self.driver.save_screenshot(str(path)), f"no screenshot saved at {path}"
        self.driver.set_window_size(*DESKTOP)
        assert path.stat().st_size > 5_000, f"{path} is nearly empty"
        self.shots.append(path)
        return path

    def login(self, user: str) -> None:
        self.go("/")
        self.fill({"#username": user, "#password": PASSWORDS[user]})
        self.submit("#login")
        self.wait_text("#principal", lambda t: t == f"User:{user}", f"{user} to be logged in")

    def logout(self) -> None:
        self.submit("#logout")
        self.find("#username")


def _group_with_lag(bootstrap: str, topic: str, group: str, consumed: int, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    admin.close()
    _produce(bootstrap, topic, total)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    got: list[object] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < consumed and time.monotonic() < deadline:
        got += consumer.consume(consumed - len(got), 1)
    assert len(got) >= consumed, f"the group read {len(got)} of {consumed} records"
    consumer.close()
    # the group's committed offsets, said exactly (whichever partitions the consumer happened to read)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    halves = [TopicPartition(topic, p, consumed // 2) for p in (0, 1)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, halves)])[group].result(30)
    admin.close()


def _produce(bootstrap: str, topic: str, count: int, value: str = "record") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=f"{value} {i}".encode(), key=f"k{i % 7}".encode())
    assert producer.flush(WAIT_S) == 0
    producer.close()


def test_a_walk_through_the_console(browser: WebDriver, sasl_broker: SaslBroker,
                                    console_for: Callable[[ConsoleSettings], ConsoleServer]) -> None:  # fmt: skip
    server = console_for(sasl_broker.settings())
    walk = Walk(browser, server.url)
    plain = sasl_broker.process.bootstrap
    _group_with_lag(plain, "clicks", "dave-readers", consumed=20, total=50)  # 55 after the overview's 5

    # log in (every page sends a visitor without a session to the login page)
    walk.go("/topics")
    assert "/login" in browser.current_url
    walk.shot("01-login")
    walk.fill({"#username": "admin", "#password": "wrong"})
    walk.submit("#login")
    assert "invalid credentials" in walk.wait_text("#error", lambda t: "login failed" in t, "the login error")
    walk.fill({"#username": "admin", "#password": PASSWORDS["admin"]})
    walk.submit("#login")
    walk.wait_text("#principal", lambda t: t == "User:admin", "admin to be logged in")
    assert browser.current_url.endswith("/topics")  # back where the visit began
    cookie = browser.get_cookie("logstore_console")
    assert cookie is not None and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie") == ""  # HttpOnly: no script sees it

    walk.go("/")
    assert walk.text("#brokers") == "1"
    # live bytes in/out (read from the broker's /metrics): rates once two readings exist, then some traffic
    walk.wait_text("#traffic", lambda t: "in (produce)" in t, "the overview's traffic box to show rates")
    _produce(plain, "clicks", 5)
    walk.wait_text("#bytes-in", lambda t: t.endswith("/s") and not t.startswith("0 B"), "bytes in to show the produce")
    walk.shot("02-overview")
    walk.shot("02-overview-phone", PHONE)

    # create a topic
    walk.go("/topics")
    walk.click("#create-topic summary")
    walk.fill({"#new-topic-name": "browser-events", "#new-topic-partitions": "3"})
    walk.submit("#create-topic-submit")
    assert "created with 3 partition(s)" in walk.wait_text("#flash", lambda t: "created" in t, "the topic to be made")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 3
    walk.shot("04-topic")
    walk.go("/topics")
    walk.find('a[href="/topics/browser-events"]')
    walk.shot("03-topics")

    # produce a message with a header, then find it by that header
    walk.go("/topics/browser-events/messages")
    walk.fill({"#produce-key": "order-42", "#produce-value": '{"item": "book", "qty": 2}',
               "#produce-headers": "trace=browser-7f3a\norigin=web", "#produce-partition": "2"})  # fmt: skip
    walk.submit("#produce-submit")
    flash = walk.wait_text("#flash", lambda t: "produced to partition 2" in t, "the produce acknowledgement")
    assert "at offset 0" in flash
    for i in range(5):  # others without the header, to be filtered out
        walk.fill({"#produce-key": f"other-{i}", "#produce-value": f"noise {i}", "#produce-headers": "",
                   "#produce-partition": "-1"})  # fmt: skip
        walk.submit("#produce-submit")
        walk.wait_text("#flash", lambda t: "produced" in t, "a produce acknowledgement")
    walk.fill({"#filter-header": "trace=browser-7f", "#filter-value": ""})
    Select(walk.find("#start")).select_by_value("beginning")
    Select(walk.find("#decode")).select_by_visible_text("json")
    walk.submit("#search-submit")
    outcome = walk.wait_text("#search-outcome", lambda t: t.startswith("1 shown"), "the header search")
    assert "6 scanned" in outcome
    found = walk.text("#messages")
    assert "order-42" in found and "trace=browser-7f3a" in found and '"qty": 2' in found and "noise" not in found
    walk.shot("05-messages")
    walk.shot("05-messages-phone", PHONE)
    # a live tail (of the whole topic; a tail keeps the search's filters): a record produced elsewhere
    # appears without a reload
    walk.go("/topics/browser-events/messages")
    walk.click("#live")
    walk.find("#live-stop")
    _produce(plain, "browser-events", 1, value="tailed-in-live")
    walk.wait_text("#messages", lambda t: "tailed-in-live" in t, "the live tail to show the new record")
    assert int(walk.find("#messages").get_attribute("data-refreshed") or 0) >= 1

    # an Avro value, decoded through the schema registry
    schema = ('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, '
              '{"name": "item", "type": "string"}]}')  # fmt: skip
    serialize = AvroSerializer(SchemaRegistryClient({"url": sasl_broker.registry_url}), schema)
    framed = serialize({"id": 7, "item": "espresso machine"}, SerializationContext("browser-events", "value"))
    producer = Producer({"bootstrap.servers": plain, "linger.ms": 0})
    producer.produce("browser-events", value=framed, key=b"avro-1", partition=0)
    assert producer.flush(WAIT_S) == 0
    producer.close()
    walk.go("/topics/browser-events/messages?start=beginning&partition=0&key=avro-1")
    Select(walk.find("#decode")).select_by_visible_text("schema")
    walk.submit("#search-submit")
    decoded = walk.wait_text("#messages", lambda t: "espresso machine" in t, "the Avro value decoded")
    assert '"id": 7' in decoded and "Avro, schema id" in decoded
    walk.shot("05-messages-avro")

    # a group's lag, live: grows on the chart as records arrive, then a reset to the latest with a preview
    walk.go("/groups")
    walk.find('a[href="/groups/dave-readers"]')
    walk.shot("06-groups")
    walk.click('a[href="/groups/dave-readers"]')
    assert walk.text("#total-lag") == "35"
    assert "35 records in all" in walk.text("#lag-chart")
    walk.shot("07-group")
    _produce(plain, "clicks", 20)
    chart = walk.wait_text("#lag-chart", lambda t: "55 records in all" in t, "the chart to show the new lag")
    assert "clicks/0" in chart and "clicks/1" in chart
    assert int(walk.find("#lag-chart").get_attribute("data-refreshed") or 0) >= 1  # by the page's script
    Select(walk.find("#reset-to")).select_by_visible_text("latest")
    walk.submit("#reset-preview")
    walk.find("#plan")
    plan = walk.text("#plan")
    assert "clicks" in plan and "Reset offsets to latest: preview" in walk.text("h1")
    walk.shot("08-reset-preview")
    walk.go("/groups/dave-readers")
    assert walk.text("#total-lag") == "55"  # a preview changes nothing
    walk.go("/groups/dave-readers")
    Select(walk.find("#reset-to")).select_by_visible_text("latest")
    walk.submit("#reset-preview")
    walk.submit("#reset-apply")
    walk.wait_text("#flash", lambda t: "reset on 2 partition(s)" in t, "the reset")
    assert walk.text("#total-lag") == "0"
    walk.go("/acls")
    assert "User:dave" in walk.text("#acls")
    walk.shot("10-acls")
    walk.go("/users")
    assert "dave" in walk.text("#users")
    walk.click("#set-user summary")
    walk.fill({"#user-name": "frank", "#user-password": "franks-secret"})
    walk.submit("#set-user-submit")
    walk.wait_text("#flash", lambda t: "frank: SCRAM-SHA-512 credential set" in t, "the new user")
    assert "frank" in walk.text("#users") and "franks-secret" not in walk.text()
    walk.shot("11-users")
    walk.logout()

    # dave: his ACLs let him read paid, not create topics; the broker's refusal is on the page
    walk.login("dave")
    walk.go("/topics")
    walk.click("#create-topic summary")
    walk.fill({"#new-topic-name": "daves-topic"})
    walk.submit("#create-topic-submit")
    error = walk.wait_text("#error", lambda t: "AUTHORIZATION" in t, "the authorization error")
    assert "not allowed: the broker answered TOPIC_AUTHORIZATION_FAILED" in error
    assert "Error 403" in walk.text("h1")
    walk.shot("09-refused")
    walk.logout()
    walk.go("/groups")
    assert "/login" in browser.current_url  # logged out: back to the login page
    assert len(walk.shots) == 14
