// Drives agentd's AI SDK chat endpoint with the `ai` package's own client
// parts: `DefaultChatTransport` (as `useChat` uses it) sends and resumes,
// `readUIMessageStream` assembles the UIMessage. Prints one JSON object:
// {message, chunks (types), header}.
//
// Environment: AI_SDK (the package's dist/index.js), URL, TOKEN, SESSION,
// MODE (send | cut-and-resume | resume | approve), PROMPT, and for
// `approve` MESSAGE (the assistant UIMessage so far, JSON) and APPROVED.
const { DefaultChatTransport, readUIMessageStream } = await import(process.env.AI_SDK);

const api = `${process.env.URL}/v1/sessions/${process.env.SESSION}/chat`;
let header = null;
const transport = new DefaultChatTransport({
  api,
  headers: { Authorization: `Bearer ${process.env.TOKEN}` },
  prepareReconnectToStreamRequest: () => ({ api: `${api}/stream` }),
  fetch: async (url, init) => {
    const response = await fetch(url, init);
    header = response.headers.get("x-vercel-ai-ui-message-stream");
    return response;
  },
});

const chunks = [];
function recorded(stream) {
  return stream.pipeThrough(new TransformStream({
    transform(chunk, controller) {
      chunks.push(chunk.type);
      controller.enqueue(chunk);
    },
  }));
}

// The message the stream assembles; `stopAfter` cuts the connection once a
// chunk of that type arrived.
async function assemble(stream, { message, stopAfter, abort } = {}) {
  let last = message;
  for await (const update of readUIMessageStream({ message, stream: recorded(stream), terminateOnError: true })) {
    last = update;
    if (stopAfter && chunks.includes(stopAfter)) {
      abort.abort();
      break;
    }
  }
  return structuredClone(last);
}

const user = { id: `user-${Date.now()}`, role: "user", parts: [{ type: "text", text: process.env.PROMPT ?? "" }] };
const send = (abortSignal, messages = [user]) => transport.sendMessages({
  chatId: process.env.SESSION, messages, trigger: "submit-message", messageId: undefined, abortSignal,
});

const mode = process.env.MODE;
let out;
if (mode === "send") {
  out = { message: await assemble(await send(undefined)) };
} else if (mode === "cut-and-resume") {
  const abort = new AbortController();
  const partial = await assemble(await send(abort.signal), { stopAfter: "tool-input-available", abort });
  const cutAt = chunks.length;
  const resumed = await transport.reconnectToStream({ chatId: process.env.SESSION });
  if (resumed === null) throw new Error("no stream to resume (204)");
  // The replay starts from the turn's start: assembled afresh.
  out = { partial, cutAt, message: await assemble(resumed) };
} else if (mode === "resume") {
  const resumed = await transport.reconnectToStream({ chatId: process.env.SESSION });
  out = { resumed: resumed !== null };
} else if (mode === "approve") {
  const first = await assemble(await send(undefined));
  // What `addToolApprovalResponse` does to the waiting tool part.
  const answered = structuredClone(first);
  const waiting = answered.parts.find((part) => part.state === "approval-requested");
  if (!waiting) throw new Error(`no approval requested: ${JSON.stringify(first)}`);
  waiting.state = "approval-responded";
  waiting.approval = { ...waiting.approval, approved: process.env.APPROVED === "true" };
  const firstChunks = chunks.splice(0);
  const rest = await send(undefined, [user, answered]);
  out = { first, firstChunks, message: await assemble(rest, { message: answered }) };
} else {
  throw new Error(`unknown MODE ${mode}`);
}
console.log(JSON.stringify({ ...out, chunks, header }));
