"""Headless Chromium through Selenium for the page's tests (Debian's
chromium, chromium-driver and python3-selenium)."""

import shutil

from procs import missing_tools


def need_browser():
    """Exits 77 (skipped) outside CI when a tool is missing."""
    missing_tools({n: shutil.which(n)
                   for n in ("chromium", "chromedriver")},
                  "apt-get install chromium chromium-driver python3-selenium")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing_tools({"python3-selenium": None},
                      "apt-get install python3-selenium")


def browser(width=1280, height=1600):
    """Headless Chromium through chromedriver, its console kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=%d,%d" % (
                     width, height),
                 "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")),
                            options=options)
