"""``idem-assets check`` in four parts: the code location (``location``), the check runs
(``run``), the text and JUnit reports (``report``) and the command line
(``idem_assets.check_command``)."""
