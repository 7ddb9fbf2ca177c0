// A real OpenID Connect provider for the test suite: panva's oidc-provider (certified), with
// users, groups and clients read from a JSON file the tests write (tests/oidc_provider.py).
//
//   node tests/oidc/provider.mjs <config.json>
//
// config: {"port", "issuer", "jwks": {"keys": [private JWKs, the first signs]}, "clients": [client
// metadata], "users": [{"id", "username", "password", "email", "name", "groups", "disabled"}],
// "resources": {"<resource indicator>": {"ttl": seconds by client id, "default": seconds}},
// "defaultResource", "controlToken"}
//
// What Meridian relies on, as a provider in production does it:
// - authorization code flow with PKCE required of every client; a login page of its own
//   (username and password, checked here); consent granted for first-party clients;
// - the ID token carries the profile, email and groups claims (conformIdTokenClaims: false);
// - access tokens for a resource (RFC 8707) are JWTs signed with the provider's key, audience
//   = the resource, carrying the user's groups and username;
// - refresh tokens for clients allowed the grant (Meridian re-checks the user with them);
//   a refresh for a disabled user fails (the account is not found);
// - RP-initiated logout ends the provider's session.
// Test-only control (bearer controlToken): POST /_test/users/<username> {"groups", "disabled"}.
import http from 'node:http';
import { readFileSync } from 'node:fs';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const users = new Map(config.users.map((user) => [user.id, { groups: [], disabled: false, ...user }]));
const SCOPES = 'openid offline_access email profile groups api';

function byUsername(username) {
  return [...users.values()].find((user) => user.username === username);
}

function userClaims(user) {
  return {
    sub: user.id, email: user.email, email_verified: true, name: user.name,
    preferred_username: user.username, groups: user.groups,
  };
}

async function grantEverything(oidc, grantId, clientId, accountId) {
  const grant = (grantId && await oidc.Grant.find(grantId)) || new oidc.Grant({ clientId, accountId });
  grant.addOIDCScope(SCOPES);
  grant.addOIDCClaims(['sub', 'email', 'email_verified', 'name', 'preferred_username', 'groups']);
  for (const resource of Object.keys(config.resources)) grant.addResourceScope(resource, 'api');
  await grant.save();
  return grant;
}

const configuration = {
  clients: config.clients,
  jwks: config.jwks,
  cookies: { keys: ['meridian-test-provider-cookie-key'] },
  claims: {
    openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'preferred_username'], groups: ['groups'],
  },
  scopes: SCOPES.split(' '),
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  async findAccount(ctx, id) {
    const user = users.get(id);
    if (!user || user.disabled) return undefined;
    return { accountId: id, async claims() { return userClaims(user); } };
  },
  async loadExistingGrant(ctx) {
    // First-party clients: consent is implied, every scope and the default resource granted.
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const found = await ctx.oidc.provider.Grant.find(grantId);
      if (found) return found;
    }
    return grantEverything(ctx.oidc.provider, null, ctx.oidc.client.clientId, ctx.oidc.session.accountId);
  },
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  async extraTokenClaims(ctx, token) {
    const user = token.accountId && users.get(token.accountId);
    if (!user || token.kind !== 'AccessToken') return undefined;
    return { groups: user.groups, preferred_username: user.username };
  },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = `<!DOCTYPE html><html><head><title>Sign out</title></head><body>
          <h1>Sign out of the test provider?</h1>${form}
          <button id="op-logout" type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
          </body></html>`;
      },
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf || config.defaultResource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resource, client) => {
        const server = config.resources[resource];
        if (!server) throw new errors.InvalidTarget();
        return {
          scope: 'api', audience: resource, accessTokenFormat: 'jwt',
          accessTokenTTL: server.ttl?.[client.clientId] ?? server.default ?? 600,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { Session: 3600, Interaction: 600, Grant: 3600, IdToken: 3600, RefreshToken: 3600, AuthorizationCode: 60 },
};

const provider = new Provider(config.issuer, configuration);
const callback = provider.callback();

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function loginPage(uid, error = '') {
  return `<!DOCTYPE html><html><head><title>Test provider: sign in</title></head><body>
    <h1>Sign in to the test provider</h1>${error ? `<p id="op-error">${escape(error)}</p>` : ''}
    <form method="post" action="/interaction/${escape(uid)}/login">
      <label>Username <input id="op-username" name="username" autocomplete="off"></label>
      <label>Password <input id="op-password" name="password" type="password"></label>
      <button id="op-submit" type="submit">Sign in</button>
    </form></body></html>`;
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name !== 'login') {
    // Consent, which native (command-line) clients are always asked for: granted, first party.
    const grant = await grantEverything(provider, details.grantId, details.params.client_id, details.session.accountId);
    await provider.interactionFinished(req, res, { consent: { grantId: grant.jti } }, { mergeWithLastSubmission: true });
    return;
  }
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(loginPage(uid));
    return;
  }
  if (action !== 'login') {
    res.writeHead(404).end();
    return;
  }
  const form = new URLSearchParams(await body(req));
  const user = byUsername(form.get('username'));
  if (!user || user.password !== form.get('password') || user.disabled) {
    const why = user && user.disabled ? 'This account is disabled.' : 'Wrong username or password.';
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(loginPage(uid, why));
    return;
  }
  await provider.interactionFinished(req, res, { login: { accountId: user.id } }, { mergeWithLastSubmission: false });
}

async function control(req, res, username) {
  if (req.headers.authorization !== `Bearer ${config.controlToken}`) {
    res.writeHead(401).end();
    return;
  }
  const user = byUsername(username);
  if (!user) {
    res.writeHead(404).end();
    return;
  }
  const change = JSON.parse((await body(req)) || '{}');
  if (Array.isArray(change.groups)) user.groups = change.groups;
  if (typeof change.disabled === 'boolean') user.disabled = change.disabled;
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(userClaims(user)));
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, config.issuer);
    const match = url.pathname.match(/^\/interaction\/([^/]+)(?:\/(\w+))?$/);
    if (match) return await interaction(req, res, match[1], match[2]);
    const user = url.pathname.match(/^\/_test\/users\/([^/]+)$/);
    if (user && req.method === 'POST') return await control(req, res, decodeURIComponent(user[1]));
    return callback(req, res);
  } catch (error) {
    console.error(error);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(error));
  }
});

server.listen(config.port, '127.0.0.1', () => console.log(`oidc-provider listening on ${config.issuer}`));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
