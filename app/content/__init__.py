"""What a fetched body holds: its charset, main text, Markdown and metadata, as pure functions.

`extract.extract` is the one entry point; the fetcher runs it in the extraction processes
(`pool`), since a good extractor costs many times a small page's fetch.
"""
