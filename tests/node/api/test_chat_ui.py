#!/usr/bin/env python3
"""The chat page at / in headless Chromium (Debian's chromium + chromium-driver, selenium):
type a prompt, see the answer arrive in several streamed pieces.

Skipped (exit 77, with a message) when chromium, chromedriver or selenium is missing
(tools/install-deps.sh installs them). Set TPNODE_UI_SCREENSHOT=path.png to keep a screenshot.
Against a real server: TPNODE_API_BASE_URL / TPNODE_API_KEY as in test_openai_client.py.
"""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_test_server import ApiUnderTest  # noqa: E402


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
if not CHROMIUM or not DRIVER:
    skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:
    skip("selenium is missing (tools/install-deps.sh installs it into the venv)")

os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium look for drivers online


def main():
    server = ApiUnderTest(token_delay_ms=60)
    driver = None
    failures = []
    # The browser's profile in a directory of our own, removed afterwards (left to itself,
    # Chromium makes one in the temp directory per run and keeps it).
    profile = tempfile.TemporaryDirectory(prefix="tpnode-chromium-")
    try:
        server.wait_healthy()
        options = Options()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1000,700", "--user-data-dir=" + profile.name):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        driver.set_page_load_timeout(30)
        driver.get(server.root + "/")
        if server.api_key:
            key = driver.find_element(By.ID, "key")
            key.send_keys(server.api_key)
            key.send_keys(Keys.TAB)  # fires "change"
        if server.is_fake:
            driver.find_element(By.ID, "max").send_keys("30")
        prompt = driver.find_element(By.ID, "prompt")
        prompt.send_keys("Hello, who are you?")
        driver.find_element(By.ID, "send").click()

        # Watch the assistant's message grow until the stream is done.
        lengths = []
        deadline = time.time() + 60
        answer = None
        while time.time() < deadline:
            found = driver.find_elements(By.CSS_SELECTOR, "#log .assistant, #log .error")
            if found:
                answer = found[-1]
                text = answer.text
                if text and (not lengths or lengths[-1] != len(text)):
                    lengths.append(len(text))
                if answer.get_attribute("data-done"):
                    break
            time.sleep(0.03)
        shot = os.environ.get("TPNODE_UI_SCREENSHOT")
        if shot:
            driver.save_screenshot(shot)
        if answer is None or not answer.get_attribute("data-done"):
            failures.append("the answer did not finish within 60 s")
        elif "error" in answer.get_attribute("class"):
            failures.append("the page shows an error: " + answer.text)
        elif not answer.text.strip():
            failures.append("the answer is empty")
        if len(lengths) < 3:
            failures.append("the answer did not arrive in streamed pieces (lengths seen: %s)" % lengths)
        user = driver.find_elements(By.CSS_SELECTOR, "#log .user")
        if not user or user[0].text != "Hello, who are you?":
            failures.append("the prompt is not shown as the user's message")
        model = driver.find_element(By.ID, "model").text
        if "?" in model:
            failures.append("the model name was not loaded: " + model)
        print("streamed lengths:", lengths)
        print("answer:", answer.text if answer else None)
    finally:
        if driver:
            driver.quit()
        server.close()
        profile.cleanup()
    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (0 if failures else 1, 1 if failures else 0))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
