const http = require('http');
const config = require('./config');

class Server {
  constructor(options) {
    this.options = Object.assign({ host: 'localhost', backlog: 511 }, options);
    this.handlers = {};
  }

  route(method, url, handler) {
    this.handlers[method + ' ' + url] = handler;
    return this;
  }

  listen() {
    const server = http.createServer((req, res) => {
      const handler = this.handlers[req.method + ' ' + req.url];
      if (!handler) {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('not found');
        return;
      }
      handler(req, res);
    });
    server.listen(this.options.port, this.options.host);
    console.log('listening on %s:%d', this.options.host, this.options.port);
    return server;
  }
}

outer: for (const name of Object.keys(config.defaults)) {
  for (const other of ['name', 'port']) {
    if (name === other) {
      continue outer;
    }
  }
  console.log('extra setting', name);
}

module.exports = { Server: Server, createServer: (o) => new Server(o) };
