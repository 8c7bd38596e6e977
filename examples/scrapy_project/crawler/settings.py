# A Scrapy project using bloomline's dupefilter. Run from this directory:
#
#   python serve_site.py &            # a local test site on 127.0.0.1:8765
#   scrapy crawl site                 # one crawl, Bloom-filtered
#   scrapy crawl site -s JOBDIR=job   # pausable: Ctrl-C (or even kill -9), then run it again
#
# To share one filter between many crawl processes through Redis:
#   scrapy crawl site -s DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter \
#                     -s BLOOMLINE_REDIS_URL=redis://127.0.0.1:6379/0

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
CONCURRENT_REQUESTS = 16

DUPEFILTER_CLASS = "bloomline.scrapy.BloomDupeFilter"
BLOOMLINE_CAPACITY = 10_000_000  # grows past it (new stages), logging when it does
BLOOMLINE_ERROR_RATE = 0.0001  # a false positive drops a page
BLOOMLINE_LAYOUT = "blocked"

# The JOBDIR request queue as a journal that survives kill -9 (Scrapy's own
# loses its pending requests when the process is killed).
SCHEDULER = "bloomline.scrapy.JournalScheduler"
SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}
