"""Result files rendered to JSON, Markdown and HTML with figures."""
