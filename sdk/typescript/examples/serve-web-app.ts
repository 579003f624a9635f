// Serve a web app from a sandbox and open it: start a server as a process
// (it runs on its own), wait for its port to listen, and reach it through
// the daemon's port proxy.
//
// Run: WARREN_URL=... WARREN_KEY=... node dist-examples/serve-web-app.js
import { Warren } from "@warren/sdk";

const warren = new Warren();
await using session = await warren.sessions.create({ labels: { example: "serve-web-app" } });

await session.files.write("site/index.html", "<h1>hello from a warren sandbox</h1>\n");
const server = await session.processes.start(
  "cd /workspace/site && if command -v python3 >/dev/null; then exec python3 -m http.server 8080; else exec busybox httpd -f -p 8080; fi",
);

// Wait until something listens on 8080.
const deadline = Date.now() + 15_000;
while (!(await session.ports.list()).some((p) => p.port === 8080)) {
  if (Date.now() > deadline) {
    for await (const ev of server.logs()) if (ev.type === "output") process.stderr.write(ev.text);
    throw new Error("the server did not listen on 8080");
  }
  await new Promise((r) => setTimeout(r, 100));
}

// From a program: the URL with the credential as a header.
const url = await session.ports.url(8080);
const page = await fetch(url, { headers: { authorization: `Bearer ${process.env.WARREN_KEY}` } });
console.log(`GET ${url} -> ${page.status}: ${(await page.text()).trim()}`);

// In a browser: a short-lived token in the URL (keys never go into URLs);
// the daemon swaps it for a cookie at the first visit.
console.log(`open ${await session.ports.url(8080, { token: true })}`);
// Or make the port public (if the tenant's settings allow it):
//   await session.ports.setPublic(8080, true);
