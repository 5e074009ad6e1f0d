"""The views (tabs) of the Streamlit app, one module per tab.

``app.py`` builds the page, the sidebar and the URL state into a
:class:`appviews.common.Scenario`, then calls ``render(scenario)`` of every module listed
in its ``VIEWS``. A view module defines ``TITLE`` (the tab's label) and
``render(sc: Scenario) -> None``; it reads the scenario, calls the mlacalc API once per
figure or table, and draws with Streamlit. Adding a view is one line in ``app.py``'s
``VIEWS``. Shared pieces (cached loaders, download buttons) live in :mod:`appviews.common`.
"""
