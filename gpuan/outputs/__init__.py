"""The outputs layer: everything that turns a :class:`gpuan.result.Result` into what a user reads or opens.

``files`` writes files atomically and announces them; ``numbers`` is the one number formatter; each
analysis has one module here (``info``, ``cycles``, ``compare``, ``sol``, ``streams``, ``tensors``,
``replay``) that renders its Result as console text, JSON, tables (CSV/Parquet/XLSX) and HTML charts.
No analysis package writes or prints: the CLI is parse → load → analyse → emit through these modules.

Every module names the same things the same way: ``text(result, ...)`` returns the console report and
``json_text(result, ...)`` the JSON report, as strings the CLI prints (``document(result)`` is the dict
behind the JSON where a module has one); ``csv_text`` returns one table as CSV text; ``write_<what>(result,
path, ...)`` writes files through :mod:`gpuan.outputs.files`; ``figure``/``figures(result)`` return plotly
figures. Nothing here prints a report (:func:`gpuan.outputs.files.announce` only says on stderr what
was written)."""
