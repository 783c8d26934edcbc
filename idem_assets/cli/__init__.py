"""The ``idem-assets`` command line: ``main`` parses it; ``check`` runs asset checks from the
code location (``location``) through the check runs (``run``) to the text and JUnit reports
(``report``); ``pools`` sets each table's writer limit; ``erase`` erases a key for good and
``event_log_erasure`` finds its values in Dagster's event log. The pieces every command line
of the package shares (``idem-landing``, ``idem-source`` too) are ``idem_assets._cli_args``."""
