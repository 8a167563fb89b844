// The JSON API client: every call goes to /api/ on this origin, sends JSON
// with Content-Type application/json and reads the {code, message, data}
// envelope. The login cookie, when there is one, goes along (same origin).

// ApiError is a non-zero envelope (or a transport failure, code 0).
export class ApiError extends Error {
  constructor(message, {status = 0, code = 0, field = ''} = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

// toLogin sends the browser to the login page, back here afterwards.
export function toLogin() {
  const next = location.pathname + location.search;
  location.assign('/login?next=' + encodeURIComponent(next));
}

// api calls the API and returns the envelope's data; errors throw ApiError.
export async function api(method, path, body, {signal} = {}) {
  const init = {method, headers: {Accept: 'application/json'}, credentials: 'same-origin', signal};
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError('The server cannot be reached: ' + err.message);
  }
  if (resp.status === 401 && document.body.dataset.auth === 'on') {
    toLogin();
    throw new ApiError('Authentication required.', {status: 401, code: 40100});
  }
  let env = null;
  try { env = await resp.json(); } catch { /* not JSON */ }
  if (!env || typeof env.code !== 'number') {
    throw new ApiError(`Unexpected answer from the server: HTTP ${resp.status}.`, {status: resp.status});
  }
  if (env.code !== 0) {
    throw new ApiError(env.message || `Error ${env.code}`, {status: resp.status, code: env.code, field: env.data && env.data.field || ''});
  }
  return env.data;
}

// query builds "?a=1&b=2" from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}
