// Shared by the *.test.mjs files: E2B's SDK driven against sandboxd, with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at it.
import { Sandbox } from 'e2b'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) {
    throw new Error(`${v} is not set; point it at sandboxd (E2B_API_URL=http://HOST:PORT/e2b, E2B_SANDBOX_URL=http://HOST:PORT/e2b/sandbox, E2B_API_KEY=a tenant token)`)
  }
}

// sandboxd's own API, beside /e2b.
export const sandboxdURL = process.env.E2B_API_URL.replace(/\/e2b\/?$/, '')

// waitFor calls check until it returns a truthy value, for at most ms.
export async function waitFor(what, ms, check) {
  const end = Date.now() + ms
  let last
  for (;;) {
    try {
      const v = await check()
      if (v) return v
    } catch (e) {
      last = e
    }
    if (Date.now() > end) {
      throw new Error(`${what}: not within ${ms} ms${last ? ` (last error: ${last})` : ''}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
}

// newSandbox creates a sandbox that the test's end kills.
export async function newSandbox(t, opts) {
  const sbx = await Sandbox.create({ timeoutMs: 600_000, ...opts })
  t.after(() => sbx.kill().catch(() => {}))
  return sbx
}
