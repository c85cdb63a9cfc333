import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { AuthenticationError, NotFoundError, Sandbox, SandboxError, Template, TimeoutError } from 'e2b'
import { newSandbox, sandboxdURL, waitFor } from './helpers.mjs'

const suite = `run-${process.pid}-${Date.now()}`

test('create with metadata and envs; getInfo; list with a metadata filter; sandboxd sees it', async (t) => {
  const sbx = await newSandbox(t, { metadata: { suite, role: 'main' }, envs: { FROM_CREATE: 'yes' } })
  await newSandbox(t, { metadata: { suite, role: 'other' } })
  assert.equal((await sbx.commands.run('echo $FROM_CREATE')).stdout, 'yes\n')

  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { suite, role: 'main' })

  const mine = await Sandbox.list({ query: { metadata: { suite, role: 'main' } } }).nextItems()
  assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
  const both = await Sandbox.list({ query: { metadata: { suite } } }).nextItems()
  assert.equal(both.length, 2)
  const paused = await Sandbox.list({ query: { metadata: { suite }, state: ['paused'] } }).nextItems()
  assert.equal(paused.length, 0)
  const since = (d) => Sandbox.list({ query: { metadata: { suite }, startedAfter: d } }).nextItems()
  assert.equal((await since(new Date(Date.now() - 3600_000))).length, 2)
  assert.equal((await since(new Date(Date.now() + 3600_000))).length, 0)
  const bad = await fetch(`${process.env.E2B_API_URL}/v2/sandboxes?startedAfter=yesterday`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
  assert.equal(bad.status, 400)
  const body = await bad.json()
  assert.equal(body.code, 400)
  assert.match(body.message, /startedAfter "yesterday" is not an RFC 3339 time/)

  // An E2B sandbox is a sandboxd sandbox.
  const res = await fetch(`${sandboxdURL}/v1/sandboxes/${sbx.sandboxId}`, { headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` } })
  assert.equal(res.status, 200)
  const own = await res.json()
  assert.equal(own.id, sbx.sandboxId)
  assert.match(own.conversation, /^e2b-/)
})

test('setTimeout moves the end; a passed timeout kills the sandbox', async (t) => {
  const sbx = await newSandbox(t)
  await sbx.setTimeout(3_600_000)
  const left = ((await sbx.getInfo()).endAt.getTime() - Date.now()) / 1000
  assert.ok(left > 3500 && left <= 3600, `end in ${left} s`)

  await sbx.setTimeout(1000)
  await waitFor('the sandbox to be killed at its timeout', 30_000, async () => {
    try {
      await sbx.getInfo()
      return false
    } catch (e) {
      if (e instanceof NotFoundError) return true
      throw e
    }
  })
  assert.equal(await sbx.isRunning(), false)
})

test('pause, then connect resumes with files and processes', async (t) => {
  const sbx = await newSandbox(t)
  await sbx.files.write('kept.txt', 'still here')
  const bg = await sbx.commands.run('sleep 600', { background: true })
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await sbx.pause(), false)
  const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
  assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId))

  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.isRunning(), true)
  assert.equal(await again.files.read('kept.txt'), 'still here')
  assert.ok((await again.commands.list()).some((p) => p.pid === bg.pid))
})

test('kill; a killed sandbox is NotFoundError', async (t) => {
  const sbx = await newSandbox(t)
  const running = await sbx.commands.run('sleep 600', { background: true })
  assert.equal(await sbx.kill(), true)
  // A command whose sandbox is killed under it ends as E2B's do.
  await assert.rejects(running.wait(), (e) => {
    assert.ok(e instanceof TimeoutError, `got ${e}`)
    assert.match(e.message, /sandbox \w+ was killed or its timeout ended while the command ran/)
    assert.match(e.message, /The sandbox was killed or reached its end of life while the request was in flight/)
    return true
  })
  assert.equal(await sbx.kill(), false)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), (e) => e instanceof NotFoundError)
  await assert.rejects(sbx.getInfo(), (e) => e instanceof NotFoundError)
  // A call into a sandbox that is gone: E2B's proxy answers 502, which the
  // SDK raises as SandboxNotFoundError for a command, TimeoutError for a file.
  await assert.rejects(sbx.commands.run('true'), (e) => e instanceof NotFoundError)
  await assert.rejects(sbx.files.read('x'), (e) => e instanceof TimeoutError)
})

test('Template.exists is true for a configured template and false otherwise', async () => {
  assert.equal(await Template.exists('base'), true)
  assert.equal(await Template.exists('code-interpreter-v1'), true)
  assert.equal(await Template.exists('no-such-template'), false)
})

test('a bad API key is AuthenticationError; an unknown template says templates are not built', async () => {
  await assert.rejects(Sandbox.create({ apiKey: 'not-a-token' }), (e) => e instanceof AuthenticationError)
  await assert.rejects(Sandbox.list({ apiKey: 'not-a-token' }).nextItems(), (e) => e instanceof AuthenticationError)
  await assert.rejects(Sandbox.create('no-such-template'), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e}`)
    assert.match(e.message, /does not build templates/)
    return true
  })
})

test('getHost reaches a server in the sandbox', { skip: !process.env.E2B_DOMAIN && 'set E2B_DOMAIN to sandboxd\'s e2b.domain' }, async (t) => {
  const sbx = await newSandbox(t)
  await sbx.files.write('site/index.html', 'served from the sandbox')
  await sbx.commands.run('cd site && exec python3 -m http.server 8000 --bind 127.0.0.1', { background: true, timeoutMs: 0 })
  const host = sbx.getHost(8000)
  assert.equal(host, `8000-${sbx.sandboxId}.${process.env.E2B_DOMAIN}`)
  const api = new URL(process.env.E2B_API_URL)
  const get = (headers) => new Promise((resolve, reject) => {
    const req = http.get({ host: api.hostname, port: api.port, path: '/index.html', headers: { Host: host, ...headers } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
  })
  const page = await waitFor('the server to answer', 20_000, async () => {
    const r = await get({ 'e2b-traffic-access-token': sbx.trafficAccessToken })
    return r.status === 200 && r
  })
  assert.equal(page.body, 'served from the sandbox')
  // Without the token: 403, as E2B answers traffic to a sandbox whose ports are not public.
  assert.equal((await get({})).status, 403)
})

test('network: allowPublicTraffic opens the ports without a token; maskRequestHost is the Host the server sees', { skip: !process.env.E2B_DOMAIN && 'set E2B_DOMAIN to sandboxd\'s e2b.domain' }, async (t) => {
  const sbx = await newSandbox(t, { network: { allowPublicTraffic: true, maskRequestHost: 'custom-host.example.com:${PORT}' } })
  const server = [
    'import http.server',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    def do_GET(self):',
    '        body = self.headers.get("Host", "").encode()',
    '        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)',
    '    def log_message(self, *a): pass',
    'http.server.HTTPServer(("127.0.0.1", 8081), H).serve_forever()',
  ].join('\n')
  await sbx.files.write('host_echo.py', server)
  await sbx.commands.run('exec python3 host_echo.py', { background: true, timeoutMs: 0 })
  const api = new URL(process.env.E2B_API_URL)
  const get = () => new Promise((resolve, reject) => {
    http.get({ host: api.hostname, port: api.port, path: '/', headers: { Host: sbx.getHost(8081) } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    }).on('error', reject)
  })
  const r = await waitFor('the server to answer without a token', 20_000, async () => {
    const r = await get()
    return r.status === 200 && r
  })
  assert.equal(r.body, 'custom-host.example.com:8081')
  const info = await sbx.getInfo()
  assert.equal(info.network?.allowPublicTraffic, true)
  assert.equal(info.network?.maskRequestHost, 'custom-host.example.com:${PORT}')
})
