// A real OAuth 2.0 authorization server for the gateway's identity tests:
// oidc-provider (OpenID Certified), issuing JWT access tokens by client
// credentials with resource indicators (RFC 8707).
//
//   node oidc_server.mjs PORT RESOURCE [ALG] [BACKENDS] [TTL]
//
// BACKENDS (comma separated) are the resource URLs of backends: the
// gateway's own client ("gateway") may get tokens for them by client
// credentials, and may exchange a caller's token for one (RFC 8693 token
// exchange, which oidc-provider does not build in: the grant below is
// registered with provider.registerGrantType). The subject token must be
// a JWT this server signed for RESOURCE; the new token's `subject_sub` is
// the subject's `sub` and its `act` names the gateway (RFC 8693 4.1).
// TTL is the backend tokens' lifetime in seconds (default 300).
//
// Listens on 127.0.0.1:PORT with issuer http://127.0.0.1:PORT, signs with a
// key made at start (a restart is a key rotation: a new kid), and prints one
// JSON line {"ready": true, "kid": ...} on stdout once listening. Two clients,
// mcp-host (groups platform, dev) and ci-bot (groups dev), get their groups in
// a `groups` claim of their access tokens.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createPublicKey } from 'node:crypto';
import { jwtVerify } from 'jose';
import Provider, { errors } from 'oidc-provider';

const [port, resource, alg = 'RS256', backendList = '', ttl = '300'] = process.argv.slice(2);
const backends = backendList ? backendList.split(',') : [];
const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const issuer = `http://127.0.0.1:${port}`;

const keyOptions = {
  RS256: ['rsa', { modulusLength: 2048 }],
  PS256: ['rsa', { modulusLength: 2048 }],
  ES256: ['ec', { namedCurve: 'P-256' }],
  EdDSA: ['ed25519', {}],
}[alg];
const { privateKey } = generateKeyPairSync(...keyOptions);
const kid = randomUUID();
const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };

const GROUPS = { 'mcp-host': ['platform', 'dev'], 'ci-bot': ['dev'] };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'mcp-host',
      client_secret: 'mcp-host-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'gateway',
      client_secret: 'gateway-secret',
      grant_types: ['client_credentials', EXCHANGE],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'ci-bot',
      client_secret: 'ci-bot-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  // A groups claim per client, as an IdP's group mapper puts one in access
  // tokens: what the gateway's access policy matches on; an exchanged token
  // also carries what the exchange grant below set (subject_sub, act).
  extraTokenClaims: (ctx, token) => ({
    groups: GROUPS[token.clientId] ?? [],
    ...(ctx.exchanged ?? {}),
  }),
  scopes: ['mcp:tools', 'mcp:admin'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => serverInfo(indicator),
    },
  },
  jwks: { keys: [jwk] },
});

function serverInfo(indicator) {
  if (indicator !== resource && !backends.includes(indicator)) {
    throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  }
  return {
    scope: 'mcp:tools mcp:admin',
    audience: indicator,
    accessTokenTTL: indicator === resource ? 300 : Number(ttl),
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg } },
  };
}

const publicKey = createPublicKey(privateKey);

provider.registerGrantType(
  EXCHANGE,
  async (ctx) => {
    const { client, params } = ctx.oidc;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest('subject_token_type must be an access token');
    }
    let subject;
    try {
      ({ payload: subject } = await jwtVerify(params.subject_token, publicKey, {
        issuer,
        audience: resource,
      }));
    } catch (err) {
      throw new errors.InvalidGrant(`subject_token does not verify: ${err.code}`);
    }
    const target = params.resource || params.audience;
    const info = serverInfo(target);
    if (target === resource) throw new errors.InvalidTarget('cannot exchange for the gateway itself');
    const token = new provider.ClientCredentials({ client, scope: params.scope || 'mcp:tools' });
    token.resourceServer = new provider.ResourceServer(target, info);
    // `sub` of a client credentials token is its client: the caller goes in
    // a claim of its own.
    ctx.exchanged = {
      subject_sub: subject.sub || subject.client_id,
      act: { sub: client.clientId },
    };
    const value = await token.save();
    ctx.body = {
      access_token: value,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: 'Bearer',
      expires_in: token.expiration,
      scope: token.scope,
    };
  },
  ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
);

const server = provider.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ ready: true, kid, issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
