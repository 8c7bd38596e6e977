"""A local site of 2,500 pages whose links form cycles, on 127.0.0.1:8765."""

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGES = 2500


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if not self.path.startswith("/page/"):
            self.send_error(404)
            return
        i = int(self.path.rsplit("/", 1)[1]) % PAGES
        links = sorted({(i + 1) % PAGES, (2 * i + 1) % PAGES, (7 * i + 3) % PAGES, 0})
        body = "".join(f'<a href="/page/{j}">page {j}</a> ' for j in links)
        data = f"<html><body><h1>Page {i}</h1>{body}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 8765), Handler).serve_forever()
