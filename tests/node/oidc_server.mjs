// A real OAuth 2.0 authorization server for the gateway's identity tests:
// oidc-provider (OpenID Certified), issuing JWT access tokens by client
// credentials with resource indicators (RFC 8707).
//
//   node oidc_server.mjs PORT RESOURCE [ALG]
//
// Listens on 127.0.0.1:PORT with issuer http://127.0.0.1:PORT, signs with a
// key made at start (a restart is a key rotation: a new kid), and prints one
// JSON line {"ready": true, "kid": ...} on stdout once listening. Two clients,
// mcp-host (groups platform, dev) and ci-bot (groups dev), get their groups in
// a `groups` claim of their access tokens.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';

const [port, resource, alg = 'RS256'] = process.argv.slice(2);
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
      client_id: 'ci-bot',
      client_secret: 'ci-bot-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  // A groups claim per client, as an IdP's group mapper puts one in access
  // tokens: what the gateway's access policy matches on.
  extraTokenClaims: (_ctx, token) => ({ groups: GROUPS[token.clientId] ?? [] }),
  scopes: ['mcp:tools', 'mcp:admin'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
        return {
          scope: 'mcp:tools mcp:admin',
          audience: resource,
          accessTokenTTL: 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg } },
        };
      },
    },
  },
  jwks: { keys: [jwk] },
});

const server = provider.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ ready: true, kid, issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
