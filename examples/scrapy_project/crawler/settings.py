# A Scrapy project using bloomline's dupefilter. Run from this directory:
#
#   python serve_site.py &            # a local test site on 127.0.0.1:8765
#   scrapy crawl site                 # one crawl, Bloom-filtered
#   scrapy crawl site -s JOBDIR=job   # pausable: Ctrl-C (or even kill -9), then run it again
#
# To share one filter between many crawl processes through Redis (add
# -s SCHEDULER=scrapy_redis.scheduler.Scheduler to share the queue too):
#   scrapy crawl site -s DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter \
#                     -s REDIS_URL=redis://127.0.0.1:6379/0 -s SCHEDULER_PERSIST=True

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
CONCURRENT_REQUESTS = 16

DUPEFILTER_CLASS = "bloomline.scrapy.BloomDupeFilter"
BLOOMLINE_CAPACITY = 100_000  # the first stage; grows by stages twice as large, logging each
BLOOMLINE_ERROR_RATE = 0.0001  # the chance a new page is dropped, for the whole growing filter
BLOOMLINE_LAYOUT = "blocked"

# The JOBDIR request queue as a journal that survives kill -9 (Scrapy's own
# loses its pending requests when the process is killed).
SCHEDULER = "bloomline.scrapy.JournalScheduler"
SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}
