/** Database rows of the friends area → the contract's shapes. */
import type { components } from '../../../generated/api.d.ts';
import type { AccountProfileRow, FriendListDbRow, SearchRows, SuggestionDbRow } from './repo.ts';

type Schemas = components['schemas'];

// imageUrl, friendPronouns, friendStatus and friendBannerUrl are plain strings in the contract (the
// spec's types): '' when the account left them empty or they are not shown to the caller.
export function toFriendListRow(row: FriendListDbRow): Schemas['FriendListRow'] {
  return {
    id: row.id,
    friendUserId: row.friend_user_id,
    status: row.status,
    direction: row.direction,
    name: row.display_name,
    username: row.username,
    imageUrl: row.image_url ?? '',
    friendPronouns: row.friend_pronouns ?? '',
    friendStatus: row.friend_status ?? '',
    friendBannerUrl: row.friend_banner_url ?? '',
    isAdmin: row.is_admin,
    planKey: row.plan,
    donorSupporterUnlocked: row.donor_supporter_unlocked,
    closedBetaParticipantAt: row.closed_beta_participant_at,
    privacyBucketIds: row.bucket_ids,
    createdAt: row.created_at,
    acceptedAt: row.accepted_at,
  };
}

export function toSuggestion(row: SuggestionDbRow): Schemas['FriendSuggestionRow'] {
  return {
    friendUserId: row.id,
    mutualFriendCount: row.mutual,
    name: row.display_name,
    username: row.username,
    imageUrl: row.image_url ?? '',
    // A suggestion is never the caller's friend, so it grants nothing (docs/privacy.md).
    friendPronouns: '',
    friendStatus: '',
    friendBannerUrl: '',
    isAdmin: row.is_admin,
    planKey: row.plan,
    donorSupporterUnlocked: row.donor_supporter_unlocked,
    closedBetaParticipantAt: row.closed_beta_participant_at,
  };
}

export function toProfileCard(
  row: AccountProfileRow,
  showPrivate: boolean,
  tabs: Schemas['FriendProfileTabs'],
): Schemas['FriendProfileCard'] {
  const shown = <T>(value: T | null): T | null => (showPrivate ? value : null);
  // Pronouns, status and banner are strings in the contract: '' when hidden or unset.
  const shownText = (value: string | null): string => shown(value) ?? '';
  return {
    friendUserId: row.id,
    name: row.display_name,
    username: row.username,
    imageUrl: row.image_url ?? '',
    displayName: row.display_name,
    friendPronouns: shownText(row.pronouns),
    friendStatus: shownText(row.status),
    friendTimezone: shown(row.timezone),
    friendCountry: shown(row.country),
    friendAboutMarkdown: shown(row.about_markdown),
    friendBannerUrl: shownText(row.banner_url),
    isAdmin: row.is_admin,
    planKey: row.plan,
    donorSupporterUnlocked: row.donor_supporter_unlocked,
    closedBetaParticipantAt: row.closed_beta_participant_at,
    friendProfileTabs: tabs,
  };
}

export function toFriendsProfile(row: AccountProfileRow): Schemas['FriendsProfile'] {
  return {
    userId: row.id,
    username: row.username,
    displayName: row.display_name,
    pronouns: row.pronouns,
    status: row.status,
    timezone: row.timezone,
    country: row.country,
    aboutMarkdown: row.about_markdown,
    bannerUrl: row.banner_url,
    imageUrl: row.image_url,
    appearInSuggestions: row.appear_in_suggestions,
    updatedAt: row.updated_at,
  };
}

export function toSearchResults(rows: SearchRows): Schemas['FriendSearchResults'] {
  return {
    members: rows.members.map((m) => ({ type: 'member', id: m.id, name: m.name })),
    notes: rows.notes.map((n) => ({ type: 'note', id: n.id, title: n.title, memberIds: n.member_ids })),
    groups: rows.groups.map((g) => ({ type: g.kind, id: g.id, name: g.name })),
  };
}
