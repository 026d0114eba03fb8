// Who the page speaks for. Locally (config.auth "dev") a name typed in a form becomes the dev token
// `dev:<name>`; in AWS (config.auth "cognito") the Cognito hosted sign-in, as the OAuth 2
// authorization-code flow with PKCE (RFC 7636, S256): no client secret in the page, and a code that
// leaks from the redirect is useless without the verifier kept in this tab's sessionStorage.
// The token lives in sessionStorage: it dies with the tab and never reaches another origin.

const TOKEN = "missions.token";
const USER = "missions.user";
const VERIFIER = "missions.pkce.verifier";
const STATE = "missions.pkce.state";

export function base64url(bytes) {
  let binary = "";
  for (const byte of new Uint8Array(bytes)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A code verifier: 32 random bytes, 43 characters of base64url (RFC 7636 asks for 43 to 128). */
export function randomVerifier(size = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

/** The S256 challenge of a verifier: base64url(SHA-256(ascii(verifier))). */
export async function challengeS256(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(digest);
}

function origin(domain) {
  const base = /^https?:\/\//.test(domain) ? domain : `https://${domain}`;
  return base.replace(/\/+$/, "");
}

export function authorizeUrl(cognito, challenge, state) {
  const params = new URLSearchParams({
    response_type: "code",
    client_id: cognito.client_id,
    redirect_uri: cognito.redirect_uri,
    scope: cognito.scope || "openid email",
    code_challenge: challenge,
    code_challenge_method: "S256",
    state,
  });
  return `${origin(cognito.domain)}/oauth2/authorize?${params}`;
}

export function logoutUrl(cognito) {
  const params = new URLSearchParams({ client_id: cognito.client_id, logout_uri: cognito.redirect_uri });
  return `${origin(cognito.domain)}/logout?${params}`;
}

/** The code for tokens at Cognito's token endpoint (a public client: the verifier proves it is us). */
export async function exchangeCode(cognito, code, verifier, fetchImpl = fetch) {
  const response = await fetchImpl(`${origin(cognito.domain)}/oauth2/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: cognito.client_id,
      code,
      redirect_uri: cognito.redirect_uri,
      code_verifier: verifier,
    }),
  });
  if (!response.ok) throw new Error(`sign-in failed: the token endpoint answered ${response.status}`);
  return response.json();
}

/** The claims of a JWT (not verified: the API verifies it; the page only shows a name). */
export function claims(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), "=")));
  } catch {
    return {};
  }
}

export class Session {
  constructor(config, storage = window.sessionStorage, place = window.location) {
    this.config = config;
    this.storage = storage;
    this.place = place;
  }

  get token() {
    return this.storage.getItem(TOKEN);
  }

  get user() {
    return this.storage.getItem(USER);
  }

  get isDev() {
    return this.config.auth !== "cognito";
  }

  signInDev(name) {
    const user = name.trim();
    if (!/^[A-Za-z0-9_.@-]{1,64}$/.test(user)) throw new Error("a user name is 1 to 64 letters, digits or . _ @ -");
    this.storage.setItem(TOKEN, `dev:${user}`);
    this.storage.setItem(USER, user);
  }

  /** Off to Cognito's hosted sign-in; it comes back to redirect_uri with ?code=&state=. */
  async signInCognito() {
    const verifier = randomVerifier();
    const state = randomVerifier(16);
    this.storage.setItem(VERIFIER, verifier);
    this.storage.setItem(STATE, state);
    this.place.assign(authorizeUrl(this.config.cognito, await challengeS256(verifier), state));
  }

  /** On the way back from Cognito: the code in the address for a token (once), then a clean address. */
  async completeSignIn(fetchImpl = fetch) {
    const query = new URLSearchParams(this.place.search);
    const code = query.get("code");
    if (this.isDev || !code) return false;
    const verifier = this.storage.getItem(VERIFIER);
    const expected = this.storage.getItem(STATE);
    this.storage.removeItem(VERIFIER);
    this.storage.removeItem(STATE);
    window.history.replaceState(null, "", this.place.pathname + this.place.hash);
    if (!verifier || !expected || query.get("state") !== expected) throw new Error("sign-in failed: the answer does not match the request");
    const tokens = await exchangeCode(this.config.cognito, code, verifier, fetchImpl);
    const seen = claims(tokens.id_token || tokens.access_token);
    this.storage.setItem(TOKEN, tokens.access_token);
    this.storage.setItem(USER, seen.email || seen["cognito:username"] || seen.username || seen.sub || "you");
    return true;
  }

  signOut() {
    this.storage.removeItem(TOKEN);
    this.storage.removeItem(USER);
    if (!this.isDev) this.place.assign(logoutUrl(this.config.cognito));
  }
}
