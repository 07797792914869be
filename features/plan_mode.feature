@plan_mode @plan
Feature: Work by plan (ADR "work by plan": plan_set_content, Markdown as the single source of truth)
  The user turns plan work on with /plan on, ends it with /plan done and abandons it with /reset. The model
  stores the plan as one Markdown document with plan_set_content and reads it with plan_get.
  The plan lives in the workspace's orion.db, never only in the conversation. The scenarios
  state the ADR's five invariants, Variant B, revisions during execution and the commands.

  # -- Invariant 1: mode gating ---------------------------------------------------------------

  @invariant @gating
  Scenario: Invariant 1: plan tools are advertised only while plan work is active
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

  @invariant @gating
  Scenario: Invariant 1: plan tools are advertised again only after a new /plan on
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

  # -- Invariant 2: execution is denied while plan work is inactive ---------------------------

  @invariant @execution
  Scenario Outline: Invariant 2: a plan tool called while plan work is inactive is denied and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan done"
    When the model calls the plan tool <call>
    Then the tool "<tool>" is not advertised
    And the tool call is denied with a message containing "<tool> needs plan work, which is not active"
    And the plan tool call was denied by "orion_plugins.plan_mode"
    And the plan table is unchanged row by row
    And the denial of "<tool>" was traced as a policy denial by "orion_plugins.plan_mode"
    And no plan is active

    Examples:
      | tool             | call                                           |
      | plan_set_content | "plan_set_content" with the draft "# Hijacked" |
      | plan_get         | "plan_get"                                     |

  @invariant @execution
  Scenario Outline: Invariant 2: a plan tool advertised before another session ended plan work is denied by policy, traced, and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When another session in the workspace ends plan work while the model calls the plan tool <call>
    Then the model request that called the plan tool advertised it
    And the tool call is denied with a message containing "<tool> needs plan work, which is not active"
    And the plan tool call was denied by "orion_plugins.plan_mode"
    And the plan table is unchanged row by row
    And the denial of "<tool>" was traced as a policy denial by "orion_plugins.plan_mode"
    And the trace has a "policy_denial" event named "deny <tool>"

    Examples:
      | tool             | call                                          |
      | plan_set_content | "plan_set_content" with the draft "# Changed" |
      | plan_get         | "plan_get"                                    |

  # -- Invariant 3: Plan.markdown is the single source of truth -------------------------------

  @invariant @ssot
  Scenario: Invariant 3: Plan.markdown is the only canonical content
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

  @invariant @ssot
  Scenario: Invariant 3: plan_get returns the stored Markdown exactly, with the plan's metadata
    Given plan work is active
    When the model stores the plan draft "# Plän 📋\r\n\n- [ ] trailing spaces   \n\n```sh\necho 'hi'\n```\n\n\n" titled "Release"
    And the model calls the plan tool "plan_get"
    Then "plan_get" returned the plan draft "# Plän 📋\r\n\n- [ ] trailing spaces   \n\n```sh\necho 'hi'\n```\n\n\n"
    And the tool result has the fields "plan_id", "title", "status", "revision" and "markdown"
    And the tool result says "title" is "Release"
    And the tool result says "status" is "READY"

  # -- Invariant 4: compaction safety ---------------------------------------------------------

  @invariant @compaction
  Scenario: Invariant 4: every model request while plan work is active carries the compact plan block
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

  @invariant @compaction
  Scenario: Invariant 4: the plan block survives compaction of the conversation
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

  @invariant @compaction
  Scenario: Invariant 4: plan work, its block and its tools survive a restart
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

  # -- Invariant 5: at most one active plan ---------------------------------------------------

  @invariant @single_active_plan
  Scenario: Invariant 5: /plan on while plan work is active changes nothing
    Given plan work is active
    When the user types "/plan on"
    Then the command answers "Plan work is already active: plan untitled, COLLECTING, revision 0. Nothing changed."
    And the plan table is unchanged row by row
    And the plan table has 1 row and 1 active plan

  @invariant @single_active_plan
  Scenario: Invariant 5: a revision leaves exactly one active plan, and the database admits no second
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the model stores the plan draft "# Release\n1. Hotfix first\n2. Tag v1.2.1"
    Then the plan table has 2 rows and 1 active plan
    And the plan database refuses a second active plan

  # -- plan_set_content: Variant B and revisions ----------------------------------------------

  @plan_tools @status
  Scenario: plan_set_content stores the first draft: a COLLECTING plan becomes READY
    Given plan work is active
    When the model stores the plan draft "# Release\n1. Tag v1.2" titled "Release"
    Then the tool call succeeds
    And the tool result says "status" is "READY"
    And the active plan is "READY" at revision 1 with the Markdown "# Release\n1. Tag v1.2"
    And the active plan is titled "Release"
    And the active plan is the same plan as before

  @plan_tools @status
  Scenario: Variant B: a draft stored while the plan is READY overwrites it in the same plan
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2" titled "Release"
    When the model stores the plan draft "# Release\n1. Tag v1.2\n2. Announce it"
    Then the tool call succeeds
    And the active plan is the same plan as before
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Tag v1.2\n2. Announce it"
    And the active plan is titled "Release"
    And the plan table has 1 row and 1 active plan

  @plan_tools @revisions
  Scenario: Revisions: a draft stored while the plan is EXECUTING supersedes it with a new READY revision that is the active plan
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

  @plan_tools @revisions
  Scenario: expected_revision: a draft based on an older revision is denied and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the model stores the plan draft "# Release\n1. Stale" based on revision 0
    Then the tool call is denied with a message containing "expected_revision 0 does not match the plan's current revision 1"
    And the plan table is unchanged row by row
    When the model stores the plan draft "# Release\n1. Fresh" based on revision 1
    Then the tool call succeeds
    And the active plan is "READY" at revision 2 with the Markdown "# Release\n1. Fresh"

  @plan_tools
  Scenario: Size limit: a draft larger than max_plan_bytes (in UTF-8 bytes) is denied and changes nothing
    Given the "plan_mode" setting "max_plan_bytes" is 40
    And plan work is active
    When the model stores a plan draft of 21 "é" characters
    Then the tool call is denied with a message containing "plan_markdown is 42 bytes; the limit is 40 bytes"
    And the plan table is unchanged row by row
    When the model stores a plan draft of 40 "x" characters
    Then the tool call succeeds
    And the active plan is "READY" at revision 1

  @plan_tools @tools
  Scenario: plan_set_content takes the whole plan as the required string plan_markdown
    Given plan work is active
    When the user says "Plan the release."
    And the model replies "I will draft it."
    Then the plan tool "plan_set_content" requires "plan_markdown" as a string
    And the tool "plan_set_content" takes "plan_markdown" and "title"
    And the tool "plan_get" is advertised

  @plan_tools
  Scenario: Plan tools are control and read tools: they change no file of the workspace
    Given the workspace has a file "notes.md" containing "Ship on Friday.\n"
    And plan work is active
    When the model stores the plan draft "# Release\n1. Tag v1.2"
    And the model calls the plan tool "plan_get"
    Then the plan tools changed no file of the workspace
    And no file outside the workspace changed

  @plan_tools @tools
  Scenario: Plan tools restrict no other tool
    When the user says "Hello"
    And the model replies "Hi."
    And the user types "/plan on"
    And the model calls the tool "list_files" during plan work
    Then the tool call succeeds
    And plan work withheld no other tool from any model request

  # -- the commands ---------------------------------------------------------------------------

  @lifecycle @commands
  Scenario: /plan on starts plan work with a new COLLECTING plan
    Given plan work has not been started
    When the user types "/plan on Release 1.2"
    Then the command answers "Plan work is on: plan 'Release 1.2', COLLECTING, revision 0."
    And the active plan is "COLLECTING" at revision 0 without a draft
    And the active plan is titled "Release 1.2"
    And the plan table has 1 row and 1 active plan

  @lifecycle @commands
  Scenario: /plan approve moves a READY plan to EXECUTING
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the user types "/plan approve"
    Then the command answers "Plan approved: plan untitled, EXECUTING, revision 1."
    And the active plan is "EXECUTING" at revision 1
    And the active plan is the same plan as before

  @lifecycle @commands
  Scenario: /plan approve is refused while the plan has no draft, and changes nothing
    Given plan work is active
    When the user types "/plan approve"
    Then the command answers "The plan cannot be approved: it is COLLECTING, and approval needs READY: a draft stored with plan_set_content."
    And the plan table is unchanged row by row
    And the active plan is "COLLECTING" at revision 0 without a draft

  @lifecycle @commands
  Scenario: /plan approve is refused while the plan is already EXECUTING, and changes nothing
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    And the user types "/plan approve"
    When the user types "/plan approve"
    Then the command answers "The plan cannot be approved: it is already approved and EXECUTING."
    And the plan table is unchanged row by row

  @lifecycle @commands
  Scenario: /plan done completes an EXECUTING plan and ends plan work
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

  @lifecycle @commands
  Scenario: /plan done cancels a plan that was never approved and ends plan work
    Given plan work is active
    And the model has stored the plan draft "# Release\n1. Tag v1.2"
    When the user types "/plan done"
    Then the command answers "Plan work ended: plan untitled, CANCELLED, revision 1."
    And the previous plan is "CANCELLED" and no longer active
    And no plan is active
    When the user types "/plan done"
    Then the command answers "Plan work is not active."

  @lifecycle @commands
  Scenario: /reset ends plan work and resets the conversation
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
