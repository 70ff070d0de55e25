// node --test web/test/ — attachments: sniffing, caps, the message's content.
import test from 'node:test';
import assert from 'node:assert/strict';
import { sniffImage, toBase64, attachment, fileAttachment, messageContent, dataUrl, MAX_IMAGE_BYTES } from '../attach.js';

const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const png = () => Uint8Array.from(Buffer.from(PNG_B64, 'base64'));

test('images are told by their magic bytes, never by a name', () => {
  assert.equal(sniffImage(png()), 'image/png');
  assert.equal(sniffImage(Uint8Array.from([0xff, 0xd8, 0xff, 0xe0])), 'image/jpeg');
  assert.equal(sniffImage(new TextEncoder().encode('GIF89a')), 'image/gif');
  assert.equal(sniffImage(new TextEncoder().encode('RIFF\0\0\0\0WEBPVP8 ')), 'image/webp');
  assert.equal(sniffImage(new TextEncoder().encode('RIFF\0\0\0\0WAVEfmt ')), null);
  assert.equal(sniffImage(new TextEncoder().encode('<svg onload=x>')), null);
});

test('base64 matches the standard encoding, also past one chunk', () => {
  assert.equal(toBase64(png()), PNG_B64);
  const big = new Uint8Array(100_000).map((_, i) => i % 251);
  assert.equal(toBase64(big), Buffer.from(big).toString('base64'));
});

test('an attachment is an image under the cap, or a reason why not', () => {
  assert.deepEqual(attachment('a.png', png()), { image: { media_type: 'image/png', data: PNG_B64 } });
  assert.match(attachment('notes.txt', new TextEncoder().encode('hello')).error, /notes\.txt is not a PNG/);
  const huge = new Uint8Array(MAX_IMAGE_BYTES + 1);
  huge.set(png().subarray(0, 8));
  assert.match(attachment('huge.png', huge).error, /over 5 MiB/);
});

test('a dropped file is checked by its size and first bytes before it is read whole', async () => {
  const file = new File([png()], 'a.png');
  assert.deepEqual(await fileAttachment(file), { image: { media_type: 'image/png', data: PNG_B64 } });
  assert.match((await fileAttachment(new File(['hello'], 'notes.txt'))).error, /notes\.txt is not a PNG/);
  // A huge image: only its first bytes are read.
  const huge = new Blob([png().subarray(0, 8), new Uint8Array(MAX_IMAGE_BYTES)]);
  const reads = [];
  const watched = {
    name: 'huge.png',
    size: huge.size,
    slice: (start, end) => { reads.push([start, end]); return huge.slice(start, end); },
    arrayBuffer: () => { throw new Error('the whole file was read'); },
  };
  assert.match((await fileAttachment(watched)).error, /huge\.png is over 5 MiB/);
  assert.deepEqual(reads, [[0, 12]]);
});

test('the content is the text alone, or text and image blocks', () => {
  assert.equal(messageContent('hi', []), 'hi');
  const image = { media_type: 'image/png', data: PNG_B64 };
  assert.deepEqual(messageContent('look', [image]), [
    { type: 'text', text: 'look' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_B64 } },
  ]);
  assert.deepEqual(messageContent('  ', [image]).map((b) => b.type), ['image']);
});

test('only base64 images of the four formats become data URLs', () => {
  assert.equal(dataUrl({ type: 'base64', media_type: 'image/png', data: 'AA==' }), 'data:image/png;base64,AA==');
  assert.equal(dataUrl({ type: 'base64', media_type: 'text/html', data: 'AA==' }), null);
  assert.equal(dataUrl({ type: 'base64', media_type: 'image/png', data: 'A"><x' }), null);
  assert.equal(dataUrl({ type: 'url', url: 'https://x/y.png' }), null);
});
