/** Every migration, in order. Add new ones at the end; never edit one that has shipped. */
import * as m0001 from './0001_foundation.ts';
import * as m0002 from './0002_core_model.ts';
import * as m0003 from './0003_terminology.ts';
import * as m0004 from './0004_entries_front_trash.ts';
import * as m0005 from './0005_front_session_counts.ts';
import * as m0006 from './0006_system_data_indexes.ts';
import * as m0007 from './0007_accounts_admin.ts';
import * as m0008 from './0008_audit.ts';
import * as m0009 from './0009_jobs.ts';
import * as m0010 from './0010_storage.ts';
import * as m0011 from './0011_read_path_indexes.ts';
import * as m0012 from './0012_privacy.ts';
import * as m0013 from './0013_messaging.ts';
import * as m0014 from './0014_social.ts';
import * as m0015 from './0015_messaging_media.ts';
import * as m0016 from './0016_rate_limit_key_fk.ts';
import * as m0017 from './0017_link_previews.ts';
import * as m0018 from './0018_social_gallery.ts';
import * as m0019 from './0019_friend_history_index.ts';
import * as m0020 from './0020_front_session_buckets.ts';
import * as m0021 from './0021_entry_link_buckets.ts';
import * as m0022 from './0022_system_assignment_index.ts';
import * as m0023 from './0023_imports.ts';
import * as m0024 from './0024_exports.ts';
import * as m0025 from './0025_front_count_per_statement.ts';
import * as m0026 from './0026_events.ts';
import * as m0027 from './0027_webhooks.ts';
import * as m0028 from './0028_idempotency.ts';
import * as m0029 from './0029_member_note_counts.ts';
import * as m0030 from './0030_front_writes.ts';
import * as m0031 from './0031_jobs_order.ts';
import * as m0032 from './0032_idempotency_claims.ts';
import * as m0033 from './0033_webhook_counts.ts';
import * as m0034 from './0034_assignment_indexes.ts';
import * as m0035 from './0035_front_state_plpgsql.ts';
import * as m0036 from './0036_idempotency_held_message.ts';
import * as m0037 from './0037_friend_grants.ts';
import * as m0038 from './0038_member_bucket_ids.ts';
import * as m0039 from './0039_entry_sole_member.ts';
import * as m0040 from './0040_sole_member_unchanged.ts';

export const migrations = [
  m0001,
  m0002,
  m0003,
  m0004,
  m0005,
  m0006,
  m0007,
  m0008,
  m0009,
  m0010,
  m0011,
  m0012,
  m0013,
  m0014,
  m0015,
  m0016,
  m0017,
  m0018,
  m0019,
  m0020,
  m0021,
  m0022,
  m0023,
  m0024,
  m0025,
  m0026,
  m0027,
  m0028,
  m0029,
  m0030,
  m0031,
  m0032,
  m0033,
  m0034,
  m0035,
  m0036,
  m0037,
  m0038,
  m0039,
  m0040,
];
