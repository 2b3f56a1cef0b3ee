/** What each plan allows. One table, read by every rule that depends on the plan. */
export type PlanKey = 'free' | 'pro' | 'pro_plus';

export interface PlanEntitlements {
  activeApiKeys: number;
  customFonts: boolean;
}

export const PLANS: Record<PlanKey, PlanEntitlements> = {
  free: { activeApiKeys: 1, customFonts: false },
  pro: { activeApiKeys: 5, customFonts: true },
  pro_plus: { activeApiKeys: 5, customFonts: true },
};

export const PLAN_NAMES: Record<PlanKey, string> = { free: 'Free', pro: 'Pro', pro_plus: 'Pro+' };
