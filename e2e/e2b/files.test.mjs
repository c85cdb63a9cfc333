import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FileNotFoundError, InvalidArgumentError, NotFoundError } from 'e2b'
import { newSandbox, waitFor } from './helpers.mjs'

const allBytes = () => Uint8Array.from({ length: 256 }, (_, i) => i)

test('files', async (t) => {
  const sbx = await newSandbox(t)

  await t.test('write text and read it back as text', async () => {
    const info = await sbx.files.write('notes/hello.txt', 'héllo wörld\n')
    assert.equal(info.name, 'hello.txt')
    assert.equal(info.type, 'file')
    assert.match(info.path, /\/notes\/hello\.txt$/)
    assert.equal(await sbx.files.read('notes/hello.txt'), 'héllo wörld\n')
    assert.equal(await sbx.files.read(info.path), 'héllo wörld\n')
    const r = await sbx.commands.run('cat notes/hello.txt')
    assert.equal(r.stdout, 'héllo wörld\n')
  })

  await t.test('relative paths are in the user\'s home, and what is written there is the user\'s', async () => {
    const info = await sbx.files.write('owned/mine.txt', 'mine')
    assert.equal(info.path, '/home/user/owned/mine.txt')
    const st = await sbx.files.getInfo('owned/mine.txt')
    assert.equal(st.owner, 'user')
    assert.equal(st.group, 'user')
    assert.equal((await sbx.files.getInfo('owned')).owner, 'user')
    const r = await sbx.commands.run('stat -c %U owned/mine.txt && echo appended >> owned/mine.txt && cat owned/mine.txt')
    assert.equal(r.stdout, 'user\nmineappended\n')
    const asRoot = await sbx.files.write('rootfile.txt', 'r', { user: 'root' })
    assert.equal(asRoot.path, '/root/rootfile.txt')
    assert.equal((await sbx.files.getInfo('/root/rootfile.txt', { user: 'root' })).owner, 'root')
    // The user cannot write where E2B's user cannot.
    await assert.rejects(sbx.files.makeDir('/etc/not-mine'))
  })

  await t.test('write bytes and read them as bytes, blob and stream', async () => {
    const data = allBytes()
    await sbx.files.write('/tmp/bytes.bin', data.buffer)
    assert.deepEqual(await sbx.files.read('/tmp/bytes.bin', { format: 'bytes' }), data)
    const blob = await sbx.files.read('/tmp/bytes.bin', { format: 'blob' })
    assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), data)
    const stream = await sbx.files.read('/tmp/bytes.bin', { format: 'stream' })
    const chunks = []
    for await (const c of stream) chunks.push(...c)
    assert.deepEqual(Uint8Array.from(chunks), data)
  })

  await t.test('an empty file reads as empty in every format', async () => {
    await sbx.files.write('empty.txt', '')
    assert.equal(await sbx.files.read('empty.txt'), '')
    assert.equal((await sbx.files.read('empty.txt', { format: 'bytes' })).length, 0)
    assert.equal((await sbx.files.read('empty.txt', { format: 'blob' })).size, 0)
    let n = 0
    for await (const c of await sbx.files.read('empty.txt', { format: 'stream' })) n += c.length
    assert.equal(n, 0)
    await assert.rejects(sbx.files.rename('no-such.txt', 'other.txt'), (e) => e instanceof FileNotFoundError)
  })

  await t.test('a stream upload and gzip both ways', async () => {
    const data = allBytes()
    const body = new ReadableStream({ start(c) { c.enqueue(data.slice(0, 100)); c.enqueue(data.slice(100)); c.close() } })
    await sbx.files.write('/tmp/streamed.bin', body)
    assert.deepEqual(await sbx.files.read('/tmp/streamed.bin', { format: 'bytes', gzip: true }), data)
    await sbx.files.write('/tmp/zipped.txt', 'compressed on the way\n'.repeat(100), { gzip: true })
    assert.equal(await sbx.files.read('/tmp/zipped.txt'), 'compressed on the way\n'.repeat(100))
  })

  await t.test('write many files at once', async () => {
    const infos = await sbx.files.write([
      { path: 'many/a.txt', data: 'A' },
      { path: 'many/b.txt', data: 'B' },
    ])
    assert.deepEqual(infos.map((i) => i.name).sort(), ['a.txt', 'b.txt'])
    assert.equal(await sbx.files.read('many/b.txt'), 'B')
  })

  await t.test('makeDir, list with depth, exists, getInfo', async () => {
    assert.equal(await sbx.files.makeDir('tree/one/two'), true)
    assert.equal(await sbx.files.makeDir('tree/one/two'), false)
    await sbx.files.write('tree/one/two/leaf.txt', 'leaf')
    const top = await sbx.files.list('tree')
    assert.deepEqual(top.map((e) => [e.name, e.type]), [['one', 'dir']])
    const deep = await sbx.files.list('tree', { depth: 3 })
    // In the order of a walk, as E2B lists.
    assert.deepEqual(deep.map((e) => e.name), ['one', 'two', 'leaf.txt'])
    const leaf = deep.find((e) => e.name === 'leaf.txt')
    assert.equal(leaf.size, 4)
    assert.equal(leaf.type, 'file')
    assert.equal(await sbx.files.exists('tree/one/two/leaf.txt'), true)
    assert.equal(await sbx.files.exists('tree/nothing'), false)
    const info = await sbx.files.getInfo('tree/one/two/leaf.txt')
    assert.equal(info.name, 'leaf.txt')
    assert.equal(info.size, 4)
    assert.equal(info.permissions, '-rw-r--r--')
    assert.ok(info.modifiedTime instanceof Date)
  })

  await t.test('rename and remove', async () => {
    await sbx.files.write('moving/from.txt', 'content')
    const moved = await sbx.files.rename('moving/from.txt', 'moved/to.txt')
    assert.equal(moved.name, 'to.txt')
    assert.equal(await sbx.files.exists('moving/from.txt'), false)
    assert.equal(await sbx.files.read('moved/to.txt'), 'content')
    await sbx.files.remove('moved')
    assert.equal(await sbx.files.exists('moved/to.txt'), false)
  })

  await t.test('removing a path that does not exist succeeds, as with E2B', async () => {
    await sbx.files.remove('never/was/here.txt')
    await sbx.files.remove('never/was/here.txt')
    assert.equal(await sbx.files.exists('never/was/here.txt'), false)
  })

  await t.test('a symbolic link reports the absolute path it points to', async () => {
    await sbx.files.write('links/real.txt', 'real')
    const r = await sbx.commands.run('cd links && ln -s real.txt rel && ln -s ../links/real.txt up && ln -s /etc/hostname abs && pwd')
    const dir = r.stdout.trim()
    assert.equal((await sbx.files.getInfo('links/rel')).symlinkTarget, `${dir}/real.txt`)
    assert.equal((await sbx.files.getInfo('links/up')).symlinkTarget, `${dir}/real.txt`)
    assert.equal((await sbx.files.getInfo('links/abs')).symlinkTarget, '/etc/hostname')
    const listed = Object.fromEntries((await sbx.files.list('links')).map((e) => [e.name, e.symlinkTarget]))
    assert.equal(listed.rel, `${dir}/real.txt`)
    assert.equal(listed['real.txt'], undefined)
  })

  await t.test('watchDir reports a file written in the directory', async () => {
    await sbx.files.makeDir('watched')
    const events = []
    const handle = await sbx.files.watchDir('watched', (e) => events.push(e))
    try {
      await sbx.files.write('watched/new.txt', 'x')
      await waitFor('an event for new.txt', 15_000, () => events.some((e) => e.name === 'new.txt'))
      assert.ok(['create', 'write'].includes(events.find((e) => e.name === 'new.txt').type))
    } finally {
      await handle.stop()
    }
  })

  await t.test('watchDir reports create then write for a new file with content, and write for a file written over', async () => {
    await sbx.files.makeDir('watched2')
    await sbx.files.write('watched2/old.txt', 'before')
    const events = []
    const handle = await sbx.files.watchDir('watched2', (e) => events.push([e.name, e.type]))
    try {
      await sbx.files.write('watched2/fresh.txt', 'new content')
      await waitFor('a write event for fresh.txt', 15_000, () => events.some(([n, ty]) => n === 'fresh.txt' && ty === 'write'))
      const fresh = events.filter(([n]) => n === 'fresh.txt').map(([, ty]) => ty)
      assert.equal(fresh[0], 'create', `events for fresh.txt: ${fresh}`)
      await sbx.files.write('watched2/old.txt', 'after')
      await waitFor('an event for old.txt', 15_000, () => events.some(([n]) => n === 'old.txt'))
      const old = events.filter(([n]) => n === 'old.txt').map(([, ty]) => ty)
      assert.ok(old.includes('write'), `events for old.txt: ${old}`)
      assert.ok(!old.includes('remove'), `events for old.txt: ${old}`)
    } finally {
      await handle.stop()
    }
  })

  await t.test('file metadata is kept with the file: write, getInfo, list, rename', async () => {
    const metadata = { author: 'ada', purpose: 'upload' }
    const info = await sbx.files.write('meta/a.txt', 'with metadata', { metadata })
    assert.deepEqual(info.metadata, metadata)
    assert.deepEqual((await sbx.files.getInfo('meta/a.txt')).metadata, metadata)
    const streamed = await sbx.files.write('meta/b.txt', 'streamed', { metadata: { k: 'v' }, useOctetStream: true })
    assert.deepEqual(streamed.metadata, { k: 'v' })
    const listed = Object.fromEntries((await sbx.files.list('meta')).map((e) => [e.name, e.metadata]))
    assert.deepEqual(listed, { 'a.txt': metadata, 'b.txt': { k: 'v' } })
    assert.deepEqual((await sbx.files.rename('meta/a.txt', 'meta/c.txt')).metadata, metadata)
    const plain = await sbx.files.write('meta/plain.txt', 'none')
    assert.equal(plain.metadata, undefined)
    assert.equal((await sbx.files.getInfo('meta/plain.txt')).metadata, undefined)
    const multi = await sbx.files.writeFiles([{ path: 'meta/m1.txt', data: '1' }, { path: 'meta/m2.txt', data: '2' }], { metadata: { source: 'suite' } })
    for (const m of multi) assert.deepEqual((await sbx.files.getInfo(m.path)).metadata, { source: 'suite' })
  })

  await t.test('watchDir with includeEntry gives each event the entry as it is now', async () => {
    await sbx.files.makeDir('watched3')
    await sbx.files.write('watched3/f.txt', 'before')
    const events = []
    const handle = await sbx.files.watchDir('watched3', (e) => events.push(e), { includeEntry: true, allowNetworkMounts: true })
    try {
      await sbx.files.write('watched3/f.txt', 'after, longer')
      const ev = await waitFor('a write event with its entry', 15_000, () => events.find((e) => e.name === 'f.txt' && e.type === 'write'))
      assert.equal(ev.entry.name, 'f.txt')
      assert.equal(ev.entry.path, '/home/user/watched3/f.txt')
      assert.equal(ev.entry.type, 'file')
      assert.equal(ev.entry.size, 'after, longer'.length)
    } finally {
      await handle.stop()
    }
  })

  await t.test('errors: a missing file or directory is FileNotFoundError, listing a file or reading a directory InvalidArgumentError', async () => {
    await assert.rejects(sbx.files.read('no/such/file.txt'), (e) => e instanceof FileNotFoundError && e instanceof NotFoundError)
    await assert.rejects(sbx.files.getInfo('no/such/file.txt'), (e) => e instanceof FileNotFoundError)
    await sbx.files.write('plain.txt', 'p')
    await assert.rejects(sbx.files.list('plain.txt'), (e) => e instanceof InvalidArgumentError)
    await assert.rejects(sbx.files.watchDir('no/such/dir', () => {}), (e) => e instanceof FileNotFoundError)
    await assert.rejects(sbx.files.read('.'), (e) => e instanceof InvalidArgumentError)
  })
})
