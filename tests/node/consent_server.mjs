// The authorization server of a backend that acts for people, for the
// gateway's consent tests: oidc-provider (OpenID Certified) with the
// authorization code grant, PKCE required, resource indicators (RFC 8707)
// issuing JWT access tokens for the backend, and refresh tokens.
//
//   node consent_server.mjs PORT RESOURCE REDIRECT_URI [TTL]
//
// One confidential client, "gateway" (secret "gateway-secret"), may
// redirect to REDIRECT_URI only. A second, "gateway-login" (secret
// "gateway-login-secret", same redirect URI), is the gateway's OpenID
// Connect client for `consent.bind_login`: it gets ID tokens, no resource. The built-in development login and consent
// pages stand for the person: any login name is accepted and becomes the
// token's `sub`. TTL is the access tokens' lifetime in seconds (default 300).
// Open dynamic client registration (RFC 7591, at /reg) and token revocation
// (RFC 7009, at /token/revocation) are on, as the gateway discovers them.
// Prints one JSON line {"ready": true, "issuer": ...} on stdout once listening.
import Provider, { errors } from 'oidc-provider';

const [port, resource, redirectUri, ttl = '300'] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'gateway',
      client_secret: 'gateway-secret',
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: [redirectUri],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'gateway-login',
      client_secret: 'gateway-login-secret',
      grant_types: ['authorization_code'],
      redirect_uris: [redirectUri],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  scopes: ['openid', 'offline_access', 'tracker:read'],
  pkce: { required: () => true },
  // A refresh token for every code exchange of this client (offline_access
  // is not needed for it here).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, client) => (client.clientId === 'gateway' ? resource : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (indicator !== resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        return {
          scope: 'tracker:read',
          audience: resource,
          accessTokenTTL: Number(ttl),
          accessTokenFormat: 'jwt',
        };
      },
    },
  },
});
provider.on('server_error', (_ctx, err) => process.stderr.write(`server_error ${err}\n`));

const server = provider.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ ready: true, issuer }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
