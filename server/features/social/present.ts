/** Rows of the social tables → the contract's shapes. */
import type { components } from '../../../generated/api.d.ts';
import type { LinkRow } from './repo/links.ts';
import type { ProfileRow } from './repo/profile.ts';
import type { WidgetRow } from './repo/widgets.ts';

type Schemas = components['schemas'];

export function toLink(r: LinkRow): Schemas['SocialLink'] {
  return {
    id: r.id,
    platform: r.platform as Schemas['SocialPlatform'],
    displayName: r.display_name,
    handle: r.handle,
    url: r.url,
    description: r.description,
    badge: r.badge,
    accentColor: r.accent_color,
    avatarUrl: r.avatar_url,
    visibility: r.visibility as Schemas['SocialVisibility'],
    featured: r.featured,
    sortOrder: r.sort_order,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export function toWidget(r: WidgetRow): Schemas['SocialWidget'] {
  return {
    id: r.id,
    type: r.type as Schemas['SocialWidgetType'],
    title: r.title,
    config: r.config as Schemas['SocialWidgetConfig'],
    visibility: r.visibility as Schemas['SocialVisibility'],
    size: r.size as Schemas['SocialWidgetSize'],
    sortOrder: r.sort_order,
    pinned: r.pinned,
    collapsed: r.collapsed,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export function toSection(
  userId: string,
  profile: ProfileRow | undefined,
  links: LinkRow[],
  widgets: WidgetRow[],
): Schemas['SocialSection'] {
  return {
    userId,
    links: links.map(toLink),
    widgets: widgets.map(toWidget),
    musicConnections: [],
    theme: profile?.theme ?? null,
    updatedAt: profile ? Number(profile.updated_at) : null,
  };
}
