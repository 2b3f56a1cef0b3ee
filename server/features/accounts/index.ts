/** The accounts area's public entry point: what other areas (admin, me, plans and caps) may use. */
export { PLANS, PLAN_NAMES, type PlanKey } from './plans.ts';
export {
  accountPlan,
  countAccounts,
  createAccount,
  createApiKey,
  deleteAccount,
  describeKey,
  getAccount,
  listAccounts,
  listApiKeys,
  revokeApiKey,
} from './service.ts';
