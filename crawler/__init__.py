"""copytrack's Scrapy project: spiders, middlewares and pipelines that hand pages to tracker."""
