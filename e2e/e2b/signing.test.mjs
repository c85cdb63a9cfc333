import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { newSandbox } from './helpers.mjs'

// downloadUrl and uploadUrl: URLs signed with the sandbox's access token,
// usable by a client that has no token. With a path-based sandbox URL the
// SDK puts them at the root of sandboxd's listener, naming no sandbox.
test('signed file URLs', async (t) => {
  const sbx = await newSandbox(t)
  await sbx.files.write('signed/hello.txt', 'hello signed world')

  await t.test('a download URL reads the file without a token', async () => {
    const url = await sbx.downloadUrl('signed/hello.txt', { useSignatureExpiration: 10_000 })
    assert.equal(new URL(url).pathname, '/files')
    const res = await fetch(url)
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'hello signed world')
    // Without an expiration too.
    const forever = await fetch(await sbx.downloadUrl('signed/hello.txt'))
    assert.equal(await forever.text(), 'hello signed world')
  })

  await t.test('an expired URL is refused with envd\'s words', async () => {
    const res = await fetch(await sbx.downloadUrl('signed/hello.txt', { useSignatureExpiration: -10_000 }))
    assert.equal(res.status, 401)
    assert.deepEqual(await res.json(), { code: 401, message: 'signature is already expired' })
  })

  await t.test('a URL signed for another file or a changed signature is refused', async () => {
    const url = new URL(await sbx.downloadUrl('signed/hello.txt'))
    url.searchParams.set('path', 'signed/other.txt')
    assert.equal((await fetch(url)).status, 401)
    const forged = new URL(await sbx.downloadUrl('signed/hello.txt'))
    forged.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
    const res = await fetch(forged)
    assert.equal(res.status, 401)
    assert.deepEqual(await res.json(), { code: 401, message: 'invalid signature' })
    // A download URL does not upload.
    const form = new FormData()
    form.append('file', 'overwritten')
    assert.equal((await fetch(await sbx.downloadUrl('signed/hello.txt'), { method: 'POST', body: form })).status, 401)
    assert.equal(await sbx.files.read('signed/hello.txt'), 'hello signed world')
  })

  await t.test('an upload URL writes the file', async () => {
    const form = new FormData()
    form.append('file', 'uploaded through a signed URL')
    const res = await fetch(await sbx.uploadUrl('signed/up.txt', { useSignatureExpiration: 10_000 }), { method: 'POST', body: form })
    assert.equal(res.status, 200)
    const [entry] = await res.json()
    assert.equal(entry.name, 'up.txt')
    assert.match(entry.path, /\/signed\/up\.txt$/)
    assert.equal(await sbx.files.read('signed/up.txt'), 'uploaded through a signed URL')
  })

  await t.test('a signed URL on the sandbox\'s host name', { skip: !process.env.E2B_DOMAIN && 'set E2B_DOMAIN to sandboxd\'s e2b.domain' }, async () => {
    const url = new URL(await sbx.downloadUrl('signed/hello.txt'))
    const api = new URL(process.env.E2B_API_URL)
    const host = sbx.getHost(49983)
    const body = await new Promise((resolve, reject) => {
      http.get({ host: api.hostname, port: api.port, path: url.pathname + url.search, headers: { Host: host } }, (res) => {
        let b = ''
        res.setEncoding('utf8')
        res.on('data', (d) => { b += d })
        res.on('end', () => resolve(`${res.statusCode} ${b}`))
      }).on('error', reject)
    })
    assert.equal(body, '200 hello signed world')
  })

  await t.test('another sandbox\'s signature does not read this one\'s files', async () => {
    const other = await newSandbox(t)
    await other.files.write('signed/hello.txt', 'the other sandbox')
    assert.equal(await (await fetch(await other.downloadUrl('signed/hello.txt'))).text(), 'the other sandbox')
    assert.equal(await (await fetch(await sbx.downloadUrl('signed/hello.txt'))).text(), 'hello signed world')
  })
})
