"""The outputs layer: everything that turns a :class:`gpuan.result.Result` into what a user reads or opens.

``files`` writes files atomically and announces them; ``numbers`` is the one number formatter; each
analysis has one module here (``info``, ``cycles``, ``compare``, ``sol``, ``streams``, ``tensors``,
``replay``) that renders its Result as console text, JSON, tables (CSV/Parquet/XLSX) and HTML charts.
No analysis package writes or prints: the CLI is parse → load → analyse → emit through these modules."""
