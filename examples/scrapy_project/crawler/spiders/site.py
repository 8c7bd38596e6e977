import scrapy


class SiteSpider(scrapy.Spider):
    """Follows every link of the local test site (serve_site.py)."""

    name = "site"
    start_url = "http://127.0.0.1:8765/page/0"

    async def start(self):
        yield scrapy.Request(self.start_url)

    def parse(self, response):
        yield {"url": response.url, "title": response.css("h1::text").get()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
