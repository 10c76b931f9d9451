"""The spiders of copytrack's crawler (one per crawl strategy; campaigns use `campaign`)."""
