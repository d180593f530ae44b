// A real OpenID provider (the npm package oidc-provider) for the tests: its issuer, signing key,
// clients and the claims of each client and account come from the JSON file named on the
// command line, so that a test knows the key the provider signs with (and can forge tokens the
// provider never issued, to see them refused). Its own login and consent pages
// (devInteractions) take any name: the account's claims are the config's.
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(process.env.OIDC_PROVIDER_MODULES + '/');
const Provider = require('oidc-provider').default ?? require('oidc-provider');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

const provider = new Provider(config.issuer, {
  jwks: config.jwks,
  clients: config.clients,
  claims: { openid: ['sub'], profile: ['name', 'roles', 'tenant'] },
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, name: id, ...(config.accounts[id] ?? {}) }),
  }),
  extraTokenClaims: async (ctx, token) => config.clientClaims[token.clientId] ?? {},
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.audience,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'api',
        audience: config.audience,
        accessTokenFormat: 'jwt',
        accessTokenTTL: 600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  ttl: { AccessToken: 600, ClientCredentials: 600, IdToken: 600 },
});
provider.proxy = false;
const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${config.issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
