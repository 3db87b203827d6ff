#!/usr/bin/env python3
"""The owner's web app in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium, against a real server.

Run by Tests/RPCTests/WebAppTests.swift. It prints one JSON object per line: a step it
reached (for the test to act on: grant checked, a sample saved), then what it saw. It waits
for the test's answers as files in --signals. Screenshots of every page go to --screenshots.

    owner_web.py --url URL --owner CRED --app CRED --signals DIR --screenshots DIR --import-file ZIP --link URL
"""
import argparse
import json
import os
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

# Only guards against a test that would otherwise hang: a loaded machine may take seconds.
PATIENCE = 120


def say(**fields):
    print(json.dumps(fields), flush=True)


def wait_for_signal(directory, name):
    path = os.path.join(directory, name)
    for _ in range(PATIENCE * 10):
        if os.path.exists(path):
            return
        time.sleep(0.1)
    sys.exit(f"no signal '{name}' from the test")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--url", "--owner", "--app", "--signals", "--screenshots", "--import-file", "--link"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(PATIENCE)
    wait = WebDriverWait(driver, PATIENCE)
    seen = {}

    def shot(name):
        driver.save_screenshot(os.path.join(args.screenshots, f"{name}.png"))

    def click_and_load(element):
        """Clicks what posts a form, and waits for the page it leads to (not the one before)."""
        page = driver.find_element(By.TAG_NAME, "html")
        element.click()

        def replaced(driver):
            try:
                return expected_conditions.staleness_of(page)(driver)
            except WebDriverException as error:
                # ChromeDriver, asked about the old page while the new one replaces it, may
                # answer that its node "does not belong to the document": replaced too.
                if "does not belong to the document" in str(error):
                    return True
                raise

        wait.until(replaced)

    def sign_in(credential):
        driver.get(args.url + "/sign-in")
        field = wait.until(expected_conditions.presence_of_element_located((By.ID, "credential")))
        field.send_keys(credential)
        driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()

    try:
        # Signed out, every page leads to sign-in.
        driver.get(args.url + "/apps")
        seen["signed_out_lands_on"] = urllib.parse.urlparse(driver.current_url).path

        # An app's credential is refused.
        sign_in(args.app)
        seen["app_refused"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".error"))).text
        shot("sign-in-refused")

        # The owner signs in and sees the summary.
        sign_in(args.owner)
        wait.until(expected_conditions.presence_of_element_located((By.ID, "steps-week")))
        seen["summary_title"] = driver.title
        seen["steps_week_bars"] = len(driver.find_elements(By.CSS_SELECTOR, "#steps-week rect.bar"))
        seen["steps_month_bars"] = len(driver.find_elements(By.CSS_SELECTOR, "#steps-month rect.bar"))
        seen["steps_week_label"] = driver.find_element(By.CSS_SELECTOR, "#steps-week svg").get_attribute("aria-label")
        seen["heart_ranges"] = len(driver.find_elements(By.CSS_SELECTOR, "#heart-week rect.range"))
        seen["sleep_bars"] = len(driver.find_elements(By.CSS_SELECTOR, "#sleep-week rect.bar"))
        seen["headings"] = [heading.text for heading in driver.find_elements(By.CSS_SELECTOR, "h2")]
        shot("summary")

        # Browse a type: its statistics per day and its samples; delete one.
        driver.find_element(By.LINK_TEXT, "Browse").click()
        Select(wait.until(expected_conditions.presence_of_element_located((By.ID, "type")))).select_by_value("HKQuantityTypeIdentifierStepCount")
        driver.find_element(By.CSS_SELECTOR, "form.picker button").click()
        wait.until(expected_conditions.presence_of_element_located((By.ID, "samples")))
        seen["browse_bars"] = len(driver.find_elements(By.CSS_SELECTOR, "#browse-statistics rect.bar"))
        seen["browse_rows"] = len(driver.find_elements(By.CSS_SELECTOR, "#samples tbody tr"))
        seen["browse_first_value"] = driver.find_element(By.CSS_SELECTOR, "#samples tbody tr td:nth-child(2)").text
        shot("browse")
        click_and_load(driver.find_element(By.CSS_SELECTOR, "#samples tbody tr button"))
        seen["browse_deleted_notice"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text
        seen["browse_rows_after_delete"] = len(driver.find_elements(By.CSS_SELECTOR, "#samples tbody tr"))

        # A pending request, allowed.
        driver.find_element(By.LINK_TEXT, "Apps").click()
        wait.until(expected_conditions.presence_of_element_located((By.ID, "pending-heading")))
        seen["pending_rows"] = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#pending tbody tr")]
        shot("apps-pending")
        click_and_load(driver.find_element(By.CSS_SELECTOR, "#pending button[aria-label^='Allow Walk: read Heart rate']"))
        seen["granted_notice"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text
        seen["decided_rows"] = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#decided tbody tr")]
        shot("apps-granted")
        say(step="granted")

        # A form posted without the page's token changes nothing (sent by the page's own origin,
        # with the session's cookie, as a script injected there could).
        cookie = driver.get_cookie("healthledger_session") or {}
        seen["cookie"] = {key: cookie.get(key) for key in ("httpOnly", "sameSite", "secure", "path")}
        forged = driver.execute_async_script(
            """
            const done = arguments[arguments.length - 1];
            const body = new URLSearchParams({app: "com.example.walk", type: "HKQuantityTypeIdentifierHeartRate", direction: "2", decision: "3"});
            fetch("/apps/decide", {method: "POST", body, redirect: "manual"})
              .then((response) => response.text().then((text) => done({status: response.status, page: text})))
              .catch((error) => done({status: 0, page: String(error)}));
            """)
        seen["forged_status"] = forged["status"]
        seen["forged_page"] = forged["page"]

        # History shows who read what (once the test's read as the app is on the record), and
        # updates live: the test saves a sample as the app once the page is open.
        wait_for_signal(args.signals, "read")
        driver.find_element(By.LINK_TEXT, "History").click()
        history = wait.until(expected_conditions.presence_of_element_located((By.ID, "history")))
        seen["readers"] = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "#readers tbody tr")]
        before = len(history.find_elements(By.TAG_NAME, "li"))
        seen["history_before"] = before
        say(step="history-open")
        wait_for_signal(args.signals, "saved")
        wait.until(lambda driver: len(driver.find_elements(By.CSS_SELECTOR, "#history li")) > before)
        seen["history_newest"] = driver.find_element(By.CSS_SELECTOR, "#history li").text
        seen["history_url_unchanged"] = urllib.parse.urlparse(driver.current_url).path
        shot("history-live")

        # Data: the history verified, everything downloaded, a kind of data erased after a confirmation, then everything.
        driver.find_element(By.LINK_TEXT, "Data").click()
        seen["tree_head"] = wait.until(expected_conditions.presence_of_element_located((By.ID, "tree-head"))).text
        click_and_load(driver.find_element(By.XPATH, "//button[text()='Verify the history']"))
        seen["verified"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text
        # The downloads, fetched by the page itself (with its session).
        fetch = """
            const done = arguments[arguments.length - 1];
            fetch(arguments[0]).then((response) => response.arrayBuffer().then((body) => {
              const bytes = new Uint8Array(body);
              done({status: response.status, type: response.headers.get("Content-Type"), disposition: response.headers.get("Content-Disposition"),
                    text: new TextDecoder().decode(bytes), first: Array.from(bytes.slice(0, 2)), length: bytes.length});
            })).catch((error) => done({status: 0, text: String(error)}));
            """
        exported = driver.execute_async_script(fetch, "/data/export.jsonl")
        seen["export_disposition"] = exported["disposition"]
        lines = [json.loads(line) for line in exported["text"].splitlines() if line]
        seen["export_step_lines"] = sum(1 for line in lines if "HKQuantityTypeIdentifierStepCount" in json.dumps(line))
        Select(driver.find_element(By.ID, "erase-type")).select_by_value("HKQuantityTypeIdentifierStepCount")
        driver.find_element(By.ID, "erase-confirm").send_keys("not sure")
        click_and_load(driver.find_element(By.CSS_SELECTOR, "#erase button"))
        seen["erase_unconfirmed"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text
        Select(driver.find_element(By.ID, "erase-type")).select_by_value("HKQuantityTypeIdentifierStepCount")
        driver.find_element(By.ID, "erase-reason").send_keys("tried in the browser")
        driver.find_element(By.ID, "erase-confirm").send_keys("erase")
        click_and_load(driver.find_element(By.CSS_SELECTOR, "#erase button"))
        seen["erased"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text
        # An Apple Health export uploaded and imported, with progress; and one downloaded.
        driver.find_element(By.ID, "import-file").send_keys(args.import_file)
        driver.find_element(By.CSS_SELECTOR, "#import button").click()
        wait.until(lambda driver: driver.find_element(By.ID, "import-status").text.startswith(("Imported", "Not imported")))
        seen["imported"] = driver.find_element(By.ID, "import-status").text
        seen["import_progress"] = driver.find_element(By.ID, "import-progress").get_attribute("value")
        zipped = driver.execute_async_script(fetch, "/data/export.zip")
        seen["export_zip"] = {"type": zipped["type"], "zip": zipped["first"] == [0x50, 0x4B], "bytes": zipped["length"]}
        shot("data")
        # Everything erased, after its own confirmation, once the test has read what was there.
        say(step="before-erasing-everything")
        wait_for_signal(args.signals, "erase-everything")
        driver.find_element(By.ID, "erase-everything-reason").send_keys("starting over")
        driver.find_element(By.ID, "erase-everything-confirm").send_keys("erase everything")
        click_and_load(driver.find_element(By.CSS_SELECTOR, "#erase-everything button"))
        seen["erased_everything"] = wait.until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".notice"))).text

        # Signing out ends the session.
        driver.find_element(By.CSS_SELECTOR, "header form button").click()
        wait.until(expected_conditions.presence_of_element_located((By.ID, "credential")))
        driver.get(args.url + "/")
        seen["after_sign_out_lands_on"] = urllib.parse.urlparse(driver.current_url).path
        shot("signed-out")

        # A sign-in link: the page signs in with the credential after '#', then forgets it.
        driver.get(args.link)
        wait.until(expected_conditions.presence_of_element_located((By.ID, "steps-week")))
        seen["link_lands_on"] = urllib.parse.urlparse(driver.current_url).path
        seen["link_url_keeps_credential"] = "hl1:" in driver.current_url
        click_and_load(driver.find_element(By.CSS_SELECTOR, "header form button"))
    finally:
        driver.quit()
    say(step="done", seen=seen)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # The test reads this line: what failed, and where.
        import traceback
        say(step="failed", error=traceback.format_exc()[-4000:])
        sys.exit(1)
