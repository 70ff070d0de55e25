// A TCP proxy in front of agentd that the test can cut: every open
// connection dropped at once, new ones refused until restored. This is how
// the e2e test loses the event stream mid-turn, as a flaky network would.

import net from 'node:net';

export async function startProxy(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** Drop every connection and refuse new ones. */
    cut() {
      refusing = true;
      for (const s of sockets) s.destroy();
    },
    restore() {
      refusing = false;
    },
    close() {
      refusing = true;
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
