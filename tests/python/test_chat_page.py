"""The chat page at / (src/server/static/index.html) in headless Chromium, driven by selenium:
it loads, sends the conversation to /v1/chat/completions, renders the streamed answer as it
grows, keeps the conversation, and the stop button aborts. Needs Debian's chromium and
chromium-driver (scripts/setup.sh --test installs them); without them the tests are skipped."""
import os
import re
import shutil
import tempfile
import time

import pytest

from server_fixture import raw_request, running_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def server(binary, default_model):
    with running_server(model=default_model) as srv:
        yield srv


def test_page_is_self_contained(server):
    status, headers, body = raw_request(server.base_url, "GET", "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html"), headers
    html = body.decode()
    assert "/v1/chat/completions" in html
    external = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html)
    external += re.findall(r"""url\(\s*["']?(?:https?:)?//""", html)
    external += re.findall(r"""@import""", html)
    assert not external, f"the page must work offline, it references {external}"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("chromium and chromium-driver (Debian packages) are not installed")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1100,800"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def wait_for(pred, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# Recorded in the page: every request body sent to the server, and each length the assistant's
# answer had, as the DOM changed (so growth is seen even when polling would miss it).
INSTRUMENT = """
window.__bodies = [];
const f = window.fetch;
window.fetch = (url, init) => {
  if (init && init.body) window.__bodies.push(JSON.parse(init.body));
  return f(url, init);
};
window.__lengths = [];
new MutationObserver(() => {
  const a = document.querySelectorAll('.msg.assistant .content');
  if (a.length) window.__lengths.push(a.length + ':' + a[a.length - 1].textContent.length);
}).observe(document.getElementById('messages'),
           {childList: true, subtree: true, characterData: true});
"""


def send(drv, text):
    from selenium.webdriver.common.by import By
    box = drv.find_element(By.ID, "input")
    box.clear()
    box.send_keys(text)
    drv.find_element(By.ID, "send").click()


def idle(drv):
    from selenium.webdriver.common.by import By
    return drv.find_element(By.ID, "send").is_enabled() and \
        not drv.find_elements(By.CSS_SELECTOR, ".msg.streaming")


def set_value(drv, elem_id, value):
    drv.execute_script("document.getElementById(arguments[0]).value = arguments[1]",
                       elem_id, str(value))


def test_chat_page_streams_in_chromium(server, browser):
    from selenium.webdriver.common.by import By
    drv = browser
    drv.get(server.base_url + "/")
    wait_for(lambda: drv.find_element(By.ID, "model").text not in ("", "…"),
             what="the model name from /v1/models")
    assert "(" not in drv.find_element(By.ID, "model").text, drv.find_element(By.ID, "model").text
    drv.execute_script(INSTRUMENT)
    set_value(drv, "temperature", 0)
    set_value(drv, "max-tokens", 96)
    set_value(drv, "system", "You are a terse assistant.")

    send(drv, "Write a short poem about the sea.")
    wait_for(lambda: drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")
             and drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")[0].text,
             what="the first streamed words")
    wait_for(lambda: idle(drv), timeout=120, what="the end of the answer")
    answer = drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")[0].text
    assert answer.strip()
    assert drv.find_element(By.ID, "error").text == ""
    lengths = {int(x.split(":")[1]) for x in drv.execute_script("return window.__lengths")
               if x.startswith("1:")}
    assert len(lengths - {0}) >= 3, f"the answer did not grow in steps: {sorted(lengths)}"

    shot = os.path.join(os.environ.get("TMPDIR", tempfile.gettempdir()), "swiftinfer-chat.png")
    assert drv.save_screenshot(shot)
    with open(shot, "rb") as f:
        png = f.read()
    assert len(png) > 1000 and png.startswith(b"\x89PNG"), len(png)

    # a second turn carries the conversation: system, user, assistant, user
    send(drv, "Now one line about the sky.")
    wait_for(lambda: len(drv.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2
             and idle(drv), timeout=120, what="the second answer")
    bodies = drv.execute_script("return window.__bodies")
    assert len(bodies) == 2
    roles = [m["role"] for m in bodies[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"], roles
    assert bodies[1]["messages"][2]["content"] == answer
    assert bodies[1]["stream"] is True and bodies[1]["temperature"] == 0
    assert bodies[1]["max_tokens"] == 96


def test_stop_button_aborts(server, browser):
    from selenium.webdriver.common.by import By
    drv = browser
    drv.get(server.base_url + "/")
    wait_for(lambda: drv.find_element(By.ID, "model").text not in ("", "…"), what="model")
    set_value(drv, "max-tokens", 4000)
    set_value(drv, "temperature", 1.0)
    send(drv, "Tell me a very long story about a dragon.")
    wait_for(lambda: drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")
             and drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")[0].text,
             what="the first streamed words")
    assert drv.find_element(By.ID, "stop").is_enabled()
    drv.find_element(By.ID, "stop").click()
    wait_for(lambda: idle(drv), timeout=10, what="the stop button to end the stream")
    assert "Stopped" in drv.find_element(By.ID, "error").text
    n = len(drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")[0].text)
    time.sleep(0.5)
    assert len(drv.find_elements(By.CSS_SELECTOR, ".msg.assistant .content")[0].text) == n


def test_chat_page_shows_errors(server, browser):
    from selenium.webdriver.common.by import By
    drv = browser
    drv.get(server.base_url + "/")
    wait_for(lambda: drv.find_element(By.ID, "model").text not in ("", "…"), what="model")
    set_value(drv, "max-tokens", 10_000_000)  # beyond the context: the server says 400
    send(drv, "Hello")
    err = wait_for(lambda: drv.find_element(By.ID, "error").text, timeout=30,
                   what="an error message")
    assert err.startswith("Error:"), err
    assert idle(drv)
