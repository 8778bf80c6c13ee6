"""The ``privaudit`` command line: thin typer commands over the library, and the only layer that writes result files."""
