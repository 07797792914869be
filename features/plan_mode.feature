@plan_mode @plan
Feature: Work by plan: one Markdown plan the user approves and the model follows
  The user turns plan work on with /plan on, ends it with /plan done and abandons it with /reset. The model
  stores the plan as one Markdown document with plan_set_content and reads it with plan_get.
  The plan lives in the workspace's plans.db, never only in the conversation. The scenarios
  state the five invariants, drafts and revisions, and the commands.
  Rules: docs/design/plan-mode.md (PM-1 to PM-9)

  # -- mode gating ---------------------------------------------------------------

  @invariant @gating @PM-1
  Scenario: Plan tools are offered only while plan work is active
    When the user says "Hello"
    And the model replies "Hi."
    Then the tool "plan_set_content" is not advertised
    And the tool "plan_get" is not advertised
    When the user types "/plan on"
    And the user says "Let us plan the release."
    And the model replies "Sure."
    Then the tool "plan_set_content" is advertised
    And the tool "plan_get" is advertised
    When the user types "/plan done"
    And the user says "Thanks."
    And the model replies "You are welcome."
    Then the tool "plan_set_content" is not advertised
    And the tool "plan_get" is not advertised

  @invariant @gating @PM-1
  Scenario: Plan tools are offered again only after a new /plan on
    Given plan work is active
    When the user types "/reset"
    And the user says "Hello again."
    And the model replies "Hi."
    Then the tool "plan_set_content" is not advertised
    When the user types "/plan on"
    And the user says "A new plan, please."
    And the model replies "Sure."
    Then the tool "plan_set_content" is advertised
    And the tool "plan_get" is advertised

  # -- execution is denied while plan work is inactive ---------------------------

  @invariant @execution @PM-2
  Scenario Outline: A plan tool called while plan work is inactive is denied and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan done"
    When the model calls the plan tool <call>
    Then the tool "<tool>" is not advertised
    And the tool call is denied with a message containing "<tool> needs plan work, which is not active"
    And the plan tool call was denied by plan mode
    And the plan table is unchanged row by row
    And the denial of "<tool>" was traced as a policy denial by plan mode
    And no plan is active

    Examples:
      | tool             | call                                           |
      | plan_set_content | "plan_set_content" with the draft "# Hijacked" |
      | plan_get         | "plan_get"                                     |

  @invariant @execution @PM-2
  Scenario Outline: A plan tool offered before another session ended plan work is denied by policy, traced, and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When another session in the workspace ends plan work while the model calls the plan tool <call>
    Then the model request that called the plan tool advertised it
    And the tool call is denied with a message containing "<tool> needs plan work, which is not active"
    And the plan tool call was denied by plan mode
    And the plan table is unchanged row by row
    And the denial of "<tool>" was traced as a policy denial by plan mode
    And the trace records "deny <tool>"

    Examples:
      | tool             | call                                          |
      | plan_set_content | "plan_set_content" with the draft "# Changed" |
      | plan_get         | "plan_get"                                    |

  # -- Plan.markdown is the single source of truth -------------------------------

  @invariant @ssot @PM-3
  Scenario: The stored Markdown is the only canonical plan
    Given plan work is active
    And the model has stored a long plan draft "Release 1.2" of 20 steps
    And the user types "/plan approve"
    When the model stores a long plan draft "Release 1.2.1" of 20 steps
    And the model calls the plan tool "plan_get"
    Then "plan_get" returned the plan draft "Release 1.2.1"
    And the conversation still holds every plan draft as a tool call argument
    And the plan draft "Release 1.2.1" is stored only as the active plan's Markdown
    And the plan draft "Release 1.2" is stored only as the superseded plan's Markdown
    And no lifecycle snapshot holds a plan draft

  @invariant @ssot @PM-3
  Scenario: plan_get returns the stored Markdown exactly, with the plan's status, title and revision
    Given plan work is active
    When the model stores the plan draft "# Plän 📋\r\n\n- [ ] trailing spaces   \n\n```sh\necho 'hi'\n```\n\n\n" titled "Release"
    And the model calls the plan tool "plan_get"
    Then "plan_get" returned the plan draft "# Plän 📋\r\n\n- [ ] trailing spaces   \n\n```sh\necho 'hi'\n```\n\n\n"
    And the tool result has the fields "plan_id", "title", "status", "revision" and "markdown"
    And the tool result says "title" is "Release"
    And the tool result says "status" is "READY"
    And the tool result says "revision" is "1"

  # -- compaction safety ---------------------------------------------------------

  @invariant @compaction @PM-4
  Scenario: Every model request while plan work is active says how to recover the plan
    Given plan work is active
    When the user says "What should we do first?"
    And the model replies "Let me look around."
    Then the last model request carried the compact plan block of the COLLECTING plan
    When the model stores the plan draft "# Release\n1. Tag v1.2\n2. Announce it"
    Then the last model request carried the compact plan block of the READY plan
    And the system prompt does not contain "Tag v1.2"
    When the user types "/plan approve"
    And the model calls the tool "list_files" during plan work
    Then the last model request carried the compact plan block of the EXECUTING plan
    And every model request carried the compact plan block

  @invariant @compaction @PM-4
  Scenario: The plan block survives compaction of the conversation
    Given the plan conversation is compacted beyond 3 messages
    And plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the user says "Message 1."
    And the model replies "Reply 1."
    And the user says "Message 2."
    And the model replies "Reply 2."
    And the user says "Message 3."
    And the model replies "Reply 3."
    Then the plan conversation was compacted
    And the plan draft "# Release\n1. Tag v1.2" is not in the messages of the last model request
    And the last model request carried the compact plan block of the READY plan
    And every model request carried the compact plan block
    And the tool "plan_get" is advertised
    When the model calls the plan tool "plan_get"
    Then "plan_get" returned the plan draft "# Release\n1. Tag v1.2"

  @invariant @compaction @PM-4
  Scenario: Plan work, its block and its tools survive a restart
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2" titled "Release"
    And the user types "/plan approve"
    When Orion exits and starts again
    And the user says "Where were we?"
    And the model replies "At step 1."
    Then the last model request carried the compact plan block of the EXECUTING plan
    And the tool "plan_set_content" is advertised
    And the tool "plan_get" is advertised
    And the active plan is "EXECUTING" at revision 1
    When the model calls the plan tool "plan_get"
    Then "plan_get" returned the plan draft "# Release\n1. Tag v1.2"

  # -- at most one active plan ---------------------------------------------------

  @invariant @single_active_plan @PM-5
  Scenario: /plan on while plan work is active changes nothing
    Given plan work is active
    When the user types "/plan on"
    Then the command answers "Plan work is already active: plan untitled, COLLECTING, revision 0. Nothing changed."
    And the plan table is unchanged row by row
    And the plan table has 1 row and 1 active plan

  @invariant @single_active_plan @PM-5 @PM-6
  Scenario: A revision leaves exactly one active plan, and the database admits no second
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the model stores the plan draft "# Release\n1. Hotfix first\n2. Tag v1.2.1"
    Then the plan table has 2 rows and 1 active plan
    And the plan database refuses a second active plan

  # -- plan_set_content: Variant B and revisions ----------------------------------------------

  @plan_tools @status @PM-6
  Scenario: The first stored draft makes a collecting plan ready
    Given plan work is active
    When the model stores the plan draft "# Release\n1. Tag v1.2" titled "Release"
    Then the tool call succeeds
    And the tool result says "status" is "READY"
    And the active plan is "READY" at revision 1 with the Markdown "# Release\n1. Tag v1.2"
    And the active plan is titled "Release"
    And the active plan is the same plan as before

  @plan_tools @status @PM-6
  Scenario: A draft stored while the plan is ready overwrites it in the same plan
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2" titled "Release"
    When the model stores the plan draft "# Release\n1. Tag v1.2\n2. Announce it"
    Then the tool call succeeds
    And the active plan is the same plan as before
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Tag v1.2\n2. Announce it"
    And the active plan is titled "Release"
    And the plan table has 1 row and 1 active plan

  @plan_tools @revisions @PM-6
  Scenario: A draft stored during execution becomes a new ready revision that replaces the plan
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2" titled "Release"
    And the user types "/plan approve"
    When the model stores the plan draft "# Release\n1. Hotfix first\n2. Tag v1.2.1"
    Then the tool call succeeds
    And the active plan is a new plan that supersedes the previous one
    And the previous plan is "SUPERSEDED" and no longer active
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Hotfix first\n2. Tag v1.2.1"
    And the active plan is titled "Release"
    When the user types "/plan approve"
    Then the command answers "Plan approved: plan 'Release', EXECUTING, revision 2."

  @plan_tools @revisions @PM-9
  Scenario: A draft based on an older revision is denied and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the model stores the plan draft "# Release\n1. Stale" based on revision 0
    Then the tool call is denied with a message containing "expected_revision 0 does not match the plan's current revision 1"
    And the plan table is unchanged row by row
    When the model stores the plan draft "# Release\n1. Fresh" based on revision 1
    Then the tool call succeeds
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Fresh"

  @plan_tools @PM-9
  Scenario: A draft larger than the size limit is denied and changes nothing
    Given the "plan_mode" setting "max_plan_bytes" is 40
    And plan work is active
    When the model stores a plan draft of 21 "é" characters
    Then the tool call is denied with a message containing "plan_markdown is 42 bytes; the limit is 40 bytes"
    And the plan table is unchanged row by row
    When the model stores a plan draft of 40 "x" characters
    Then the tool call succeeds
    And the active plan is "READY" at revision 1

  @plan_tools @tools @PM-6
  Scenario: plan_set_content takes the whole plan as one required Markdown string
    Given plan work is active
    When the user says "Plan the release."
    And the model replies "I will draft it."
    Then the plan tool "plan_set_content" requires "plan_markdown" as a string
    And the tool "plan_set_content" takes "plan_markdown" and "title"
    And the tool "plan_get" is advertised

  @plan_tools @PM-8
  Scenario: Plan tools change no file of the workspace
    Given the workspace has a file "notes.md" containing "Ship on Friday.\n"
    And plan work is active
    When the model stores the plan draft "# Release\n1. Tag v1.2"
    And the model calls the plan tool "plan_get"
    Then the plan tools changed no file of the workspace
    And no file outside the workspace changed

  @plan_tools @tools @PM-8
  Scenario: Plan work restricts no other tool
    When the user says "Hello"
    And the model replies "Hi."
    And the user types "/plan on"
    And the model calls the tool "list_files" during plan work
    Then the tool call succeeds
    And plan work withheld no other tool from any model request

  # -- the commands ---------------------------------------------------------------------------

  @lifecycle @commands @PM-7
  Scenario: /plan on starts plan work with a new collecting plan
    Given plan work has not been started
    When the user types "/plan on Release 1.2"
    Then the command answers "Plan work is on: plan 'Release 1.2', COLLECTING, revision 0."
    And the active plan is "COLLECTING" at revision 0 without a draft
    And the active plan is titled "Release 1.2"
    And the plan table has 1 row and 1 active plan

  @lifecycle @commands @PM-7
  Scenario: /plan approve starts the execution of a ready plan
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the user types "/plan approve"
    Then the command answers "Plan approved: plan untitled, EXECUTING, revision 1."
    And the active plan is "EXECUTING" at revision 1
    And the active plan is the same plan as before

  @lifecycle @commands @PM-7
  Scenario: /plan approve is refused while the plan has no draft, and changes nothing
    Given plan work is active
    When the user types "/plan approve"
    Then the command answers "The plan cannot be approved: it is COLLECTING, and approval needs READY: a draft stored with plan_set_content."
    And the plan table is unchanged row by row
    And the active plan is "COLLECTING" at revision 0 without a draft

  @lifecycle @commands @PM-7
  Scenario: /plan approve is refused while the plan is already executing, and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the user types "/plan approve"
    Then the command answers "The plan cannot be approved: it is already approved and EXECUTING."
    And the plan table is unchanged row by row

  @lifecycle @commands @PM-7
  Scenario: /plan done completes an executing plan and ends plan work
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the user types "/plan done"
    Then the command answers "Plan work ended: plan untitled, COMPLETED, revision 1."
    And the previous plan is "COMPLETED" and no longer active
    And no plan is active
    When the user says "Anything else?"
    And the model replies "No."
    Then the tool "plan_get" is not advertised
    And the last model request carried no plan block

  @lifecycle @commands @PM-7
  Scenario: /plan done cancels a plan that was never approved and ends plan work
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the user types "/plan done"
    Then the command answers "Plan work ended: plan untitled, CANCELLED, revision 1."
    And the previous plan is "CANCELLED" and no longer active
    And no plan is active
    When the user types "/plan done"
    Then the command answers "Plan work is not active."

  @lifecycle @commands @PM-7
  Scenario: /reset ends plan work and starts a new conversation
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the user types "/reset"
    Then the command answers "The conversation was reset."
    And the user is told "Plan work ended: plan untitled, CANCELLED, revision 1."
    And the conversation is empty and new
    And the previous plan is "CANCELLED" and no longer active
    And no plan is active
    When the user says "Hello again."
    And the model replies "Hi."
    Then the tool "plan_set_content" is not advertised
    And the last model request carried no plan block
