// The HTTP API, same origin, authenticated by the session cookie (or by
// nothing in auth = "none" mode). No token is ever kept in the page.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let onUnauthorized = () => {};

/** Called when any request (but a sign-in attempt) answers 401. */
export function setUnauthorizedHandler(handler) {
  onUnauthorized = handler;
}

export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, 'network', `cannot reach the server (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && data.error;
    const failure = new ApiError(
      response.status,
      (error && error.code) || `http_${response.status}`,
      (error && error.message) || response.statusText || `HTTP ${response.status}`,
    );
    if (response.status === 401 && !path.startsWith('/v1/auth/')) onUnauthorized(failure);
    throw failure;
  }
  return data;
}

/** `/v1/sessions/{id}` + rest, with the id escaped. */
export function sessionPath(id, rest = '') {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}

/** A random id for `client_request_id` (crypto.randomUUID needs a secure context). */
export function requestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
