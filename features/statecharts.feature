@statechart
Feature: What the statechart engine does with a chart
  A team writes its lifecycles as YAML statecharts and relies on what the engine does with
  them: in which order entry and exit actions run, what a transition leaves and enters, which
  transition wins, when timers fire, what happens to an event sent while another is being
  processed, and what a failing action leaves behind. Each scenario writes a small chart and
  reads the order in which its actions ran (docs/design/statecharts.md).

  @SM-1
  Scenario: Entering a nested state runs the entry actions outermost first
    Given the statechart:
      """
      statechart: nested
      initial: idle
      states:
        idle: {}
        a:
          initial: a1
          entry: enter
          exit: exit
          states:
            a1:
              initial: one
              entry: enter
              exit: exit
              states:
                one: {entry: enter, exit: exit}
      transitions:
        - {trigger: go, source: idle, dest: a.a1.one}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "go" is sent
    Then the actions ran in this order:
      """
      enter a
      enter a.a1
      enter a.a1.one
      """
    And the chart is in "a.a1.one"

  @SM-1
  Scenario: The initial states are entered outermost first, and a compound target enters its initial child
    Given the statechart:
      """
      statechart: start
      initial: a
      states:
        a:
          initial: a1
          entry: [enter, act]
          states:
            a1:
              initial: one
              entry: enter
              states:
                one: {entry: enter}
                two: {entry: enter}
        b: {entry: enter}
      transitions:
        - {trigger: next, source: a.a1.one, dest: a.a1.two}
        - {trigger: leave, source: a, dest: b}
        - {trigger: back, source: b, dest: a}
      """
    Then the actions ran in this order:
      """
      enter a
      act start
      enter a.a1
      enter a.a1.one
      """
    When the event "leave" is sent
    And the event "back" is sent
    Then the actions ran in this order:
      """
      enter a
      act back
      enter a.a1
      enter a.a1.one
      """

  @SM-2
  Scenario: Leaving a nested state runs the exit actions innermost first
    Given the statechart:
      """
      statechart: nested
      initial: a
      states:
        a:
          initial: a1
          exit: exit
          states:
            a1:
              initial: one
              exit: exit
              states:
                one: {exit: exit}
        z: {entry: enter}
      transitions:
        - {trigger: leave, source: a, dest: z}
        - {trigger: back, source: z, dest: a}
      """
    When the event "leave" is sent
    Then the actions ran in this order:
      """
      exit a.a1.one
      exit a.a1
      exit a
      enter z
      """

  @SM-2 @SM-3
  Scenario: A transition to a sibling exits only the active leaf
    Given the statechart:
      """
      statechart: siblings
      initial: a
      states:
        a:
          initial: a1
          entry: enter
          exit: exit
          states:
            a1:
              initial: one
              entry: enter
              exit: exit
              states:
                one: {entry: enter, exit: exit}
                two: {entry: enter, exit: exit}
      transitions:
        - {trigger: next, source: a.a1.one, dest: a.a1.two}
        - {trigger: again, source: a.a1.two, dest: a.a1.two}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "next" is sent
    Then the actions ran in this order:
      """
      exit a.a1.one
      enter a.a1.two
      """
    When the event "again" is sent
    Then the actions ran in this order:
      """
      exit a.a1.two
      enter a.a1.two
      """

  @SM-3
  Scenario: An external transition from a compound state into it exits and enters that state again
    Given the statechart:
      """
      statechart: domain
      initial: a
      states:
        a:
          initial: a1
          entry: enter
          exit: exit
          states:
            a1:
              initial: one
              entry: enter
              exit: exit
              states:
                one: {entry: enter, exit: exit}
                two: {entry: enter, exit: exit}
      transitions:
        - {trigger: jump, source: a, dest: a.a1.two}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "jump" is sent
    Then the actions ran in this order:
      """
      exit a.a1.one
      exit a.a1
      exit a
      enter a
      enter a.a1
      enter a.a1.two
      """
    And the chart is in "a.a1.two"

  @SM-3
  Scenario: An internal transition keeps its compound source active
    Given the statechart:
      """
      statechart: domain
      initial: a
      states:
        a:
          initial: a1
          entry: enter
          exit: exit
          states:
            a1:
              initial: one
              entry: enter
              exit: exit
              states:
                one: {entry: enter, exit: exit}
                two: {entry: enter, exit: exit}
      transitions:
        - {trigger: jump, source: a, dest: a.a1.two, type: internal}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "jump" is sent
    Then the actions ran in this order:
      """
      exit a.a1.one
      exit a.a1
      enter a.a1
      enter a.a1.two
      """

  @SM-3
  Scenario: A transition of the root exits every active state and a targetless one exits nothing
    Given the statechart:
      """
      statechart: root
      initial: a
      states:
        a:
          initial: one
          exit: exit
          states:
            one: {exit: exit}
        z: {entry: enter}
      transitions:
        - {trigger: note, source: a.one, actions: act}
        - {trigger: away, source: "*", dest: z}
        - {trigger: back, source: z, dest: a}
      """
    When the event "note" is sent
    Then the actions ran in this order:
      """
      act note
      """
    And the chart is in "a.one"
    When the event "away" is sent
    Then the actions ran in this order:
      """
      exit a.one
      exit a
      enter z
      """

  @SM-4
  Scenario: The active state's own transition wins over its parent's and over a wildcard's
    Given the statechart:
      """
      statechart: priority
      initial: a
      states:
        a:
          initial: one
          states:
            one: {}
            inner: {entry: enter}
        outer: {entry: enter}
        anywhere: {entry: enter}
      transitions:
        - {trigger: poke, source: "*", dest: anywhere}
        - {trigger: poke, source: a, dest: outer}
        - {trigger: poke, source: a.one, dest: a.inner}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "poke" is sent
    Then the actions ran in this order:
      """
      enter a.inner
      """
    When the event "poke" is sent
    Then the actions ran in this order:
      """
      enter outer
      """
    When the event "poke" is sent
    Then the actions ran in this order:
      """
      enter anywhere
      """

  @SM-4
  Scenario: Within one state the first transition in the file whose guards pass is taken
    Given the statechart:
      """
      statechart: order
      initial: idle
      states:
        idle: {}
        first: {entry: enter}
        second: {entry: enter}
        third: {entry: enter}
      transitions:
        - {trigger: go, source: idle, dest: second, guards: never}
        - {trigger: go, source: idle, dest: third, guards: always}
        - {trigger: go, source: idle, dest: first}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "go" is sent
    Then the actions ran in this order:
      """
      enter third
      """

  @SM-4 @CU-5
  Scenario: A guard that raises stops the event: no transition is taken, not even a later one without guards
    Given the statechart:
      """
      statechart: order
      initial: idle
      states:
        idle: {}
        first: {entry: enter}
        third: {entry: enter}
      transitions:
        - {trigger: go, source: idle, dest: first, guards: broken}
        - {trigger: go, source: idle, dest: third}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "go" is sent
    Then no action ran
    And the chart is in "idle"
    And the guard "broken" was reported as failed
    And Orion reports an error containing "deciding 'go' in state 'idle': ValueError: the guard broke; no transition was taken"

  @SM-5 @timers
  Scenario: A timer is armed on entry and fires at its delay, not a millisecond before
    Given the statechart:
      """
      statechart: timers
      initial: idle
      states:
        idle: {}
        wait:
          after:
            - {ms: 1000, trigger: tick, dest: late}
        late: {entry: enter}
      transitions:
        - {trigger: start, source: idle, dest: wait}
        - {trigger: reset, source: "*", dest: idle}
      """
    When 300 ms pass on the chart's clock
    And the event "start" is sent
    Then the timer of "wait" is set for 1300 ms
    When 999 ms pass on the chart's clock
    Then the chart is in "wait"
    When 1 ms pass on the chart's clock
    Then the actions ran in this order:
      """
      enter late
      """

  @SM-5 @timers
  Scenario: Leaving a state cancels its timers, those of its parent too
    Given the statechart:
      """
      statechart: timers
      initial: idle
      states:
        idle: {}
        job:
          initial: wait
          after:
            - {ms: 5000, trigger: give_up, dest: late}
          states:
            wait:
              after:
                - {ms: 1000, trigger: tick, dest: late}
        late: {entry: enter}
        other: {entry: enter}
      transitions:
        - {trigger: start, source: idle, dest: job}
        - {trigger: leave, source: job, dest: other}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "start" is sent
    Then the timer of "job.wait" is set for 1000 ms
    And the timer of "job" is set for 5000 ms
    When 500 ms pass on the chart's clock
    And the event "leave" is sent
    Then no timer of "job.wait" is set
    And no timer of "job" is set
    When 10000 ms pass on the chart's clock
    Then no action ran
    And the chart is in "other"

  @SM-5 @timers
  Scenario: A transition back into the same state sets its timer again, a targetless one leaves it running
    Given the statechart:
      """
      statechart: timers
      initial: wait
      states:
        wait:
          after:
            - {ms: 1000, trigger: tick, dest: late}
        late: {entry: enter}
      transitions:
        - {trigger: note, source: wait, actions: act}
        - {trigger: again, source: wait, dest: wait}
        - {trigger: reset, source: "*", dest: wait}
      """
    When 600 ms pass on the chart's clock
    And the event "note" is sent
    Then the timer of "wait" is set for 1000 ms
    When the event "again" is sent
    Then the timer of "wait" is set for 1600 ms
    When 999 ms pass on the chart's clock
    Then the chart is in "wait"

  @SM-6
  Scenario: Entering a final child raises the completion event of its parent
    Given the statechart:
      """
      statechart: job
      initial: job
      states:
        job:
          initial: working
          states:
            working: {}
            finished: {final: true, entry: enter}
        publish: {entry: enter}
        done: {final: true, entry: enter}
      transitions:
        - {trigger: complete, source: job.working, dest: job.finished}
        - {trigger: done.state.job, source: job, dest: publish, actions: act}
        - {trigger: close, source: publish, dest: done}
      """
    When the event "complete" is sent
    Then the actions ran in this order:
      """
      enter job.finished
      act done.state.job
      enter publish
      """
    When the event "close" is sent
    Then the chart has finished
    When the event "close" is sent
    Then Orion reports an error containing "'close' is not allowed"

  @SM-6
  Scenario: A final child of a nested state raises the completion event of that state, not of the outer one
    Given the statechart:
      """
      statechart: job
      initial: job
      states:
        job:
          initial: phase
          states:
            phase:
              initial: working
              states:
                working: {}
                finished: {final: true}
            wrapped: {entry: enter}
            closed: {final: true}
        publish: {entry: enter}
      transitions:
        - {trigger: complete, source: job.phase.working, dest: job.phase.finished}
        - {trigger: done.state.job.phase, source: job.phase, dest: job.wrapped}
        - {trigger: close, source: job.wrapped, dest: job.closed}
        - {trigger: done.state.job, source: job, dest: publish}
        - {trigger: reset, source: "*", dest: job}
      """
    When the event "complete" is sent
    Then the actions ran in this order:
      """
      enter job.wrapped
      """
    When the event "close" is sent
    Then the actions ran in this order:
      """
      enter publish
      """

  @SM-7
  Scenario: An event sent while another is processed waits its turn, and events wait in the order they were sent
    Given the statechart:
      """
      statechart: queue
      initial: a
      states:
        a: {exit: exit}
        b: {entry: enter, exit: exit}
        c: {entry: enter, exit: exit}
        d: {entry: enter}
      transitions:
        - {trigger: first, source: a, dest: b, actions: [act, send_second, send_third]}
        - {trigger: second, source: b, dest: c, actions: act}
        - {trigger: third, source: c, dest: d, actions: act}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "first" is sent
    Then the actions ran in this order:
      """
      act first
      send second
      send third
      exit a
      enter b
      act second
      exit b
      enter c
      act third
      exit c
      enter d
      """

  @SM-7
  Scenario: A queued event that nothing answers when its turn comes is discarded and reported
    Given the statechart:
      """
      statechart: queue
      initial: a
      states:
        a: {}
        b: {entry: enter}
      transitions:
        - {trigger: first, source: a, dest: b, actions: send_again}
        - {trigger: again, source: a, dest: b}
        - {trigger: reset, source: "*", dest: a}
      """
    When the event "first" is sent
    Then the chart is in "b"
    And the event "again" was discarded because "no transition answers it in 'b'"
    And no error occurred

  @SM-8
  Scenario: A transition's actions run before any state is exited
    Given the statechart:
      """
      statechart: before
      initial: a
      states:
        a:
          initial: one
          exit: exit
          states:
            one: {exit: exit}
        z: {entry: enter}
      transitions:
        - {trigger: go, source: a, dest: z, actions: act}
        - {trigger: back, source: z, dest: a}
      """
    When the event "go" is sent
    Then the actions ran in this order:
      """
      act go
      exit a.one
      exit a
      enter z
      """

  @SM-8 @timers
  Scenario: A failing transition action leaves the lifecycle where it was, timers included
    Given the statechart:
      """
      statechart: before
      initial: wait
      states:
        wait:
          exit: exit
          after:
            - {ms: 1000, trigger: tick, dest: late}
        z: {entry: enter}
        late: {entry: enter}
      transitions:
        - {trigger: go, source: wait, dest: z, actions: [act, fail]}
        - {trigger: reset, source: "*", dest: wait}
      """
    When the event "go" is sent
    Then Orion reports an error containing "action 'fail'"
    And the actions ran in this order:
      """
      act go
      """
    And the chart is in "wait"
    And the timer of "wait" is set for 1000 ms

  @SM-9
  Scenario: A failing exit action still completes the transition, then the error is raised
    Given the statechart:
      """
      statechart: errors
      initial: a
      states:
        a:
          initial: one
          exit: exit
          states:
            one: {exit: [fail, exit]}
        z: {entry: [enter, fail, enter]}
        w: {entry: enter}
      transitions:
        - {trigger: go, source: a, dest: z, actions: send_next}
        - {trigger: next, source: z, dest: w}
        - {trigger: back, source: "*", dest: a}
      """
    When the event "go" is sent
    Then Orion reports an error containing "action 'fail'"
    And the actions ran in this order:
      """
      send next
      exit a
      enter z
      """
    And the chart is in "z"
    And the event "next" was discarded because "an action failed before it was processed"

  @SM-9
  Scenario: A failing entry action still enters the states below it
    Given the statechart:
      """
      statechart: errors
      initial: idle
      states:
        idle: {}
        a:
          initial: one
          entry: [fail, enter]
          states:
            one: {entry: enter}
      transitions:
        - {trigger: go, source: idle, dest: a}
        - {trigger: back, source: "*", dest: idle}
      """
    When the event "go" is sent
    Then Orion reports an error containing "action 'fail'"
    And the actions ran in this order:
      """
      enter a.one
      """
    And the chart is in "a.one"
    When the event "back" is sent
    Then the chart is in "idle"

  @SM-10
  Scenario: An event descriptor answers the events it names and those it prefixes token by token
    Given the statechart:
      """
      statechart: descriptors
      initial: idle
      states:
        idle: {}
        aborted: {entry: enter}
        stopped: {entry: enter}
      transitions:
        - {trigger: "abort.*", source: idle, dest: aborted, actions: act}
        - {trigger: "halt stop", source: idle, dest: stopped, actions: act}
        - {trigger: abortion, source: idle, dest: idle, actions: act}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "abort.network.timeout" is sent
    Then the actions ran in this order:
      """
      act abort.network.timeout
      enter aborted
      """
    When the event "reset" is sent
    And the event "abortion" is sent
    Then the actions ran in this order:
      """
      act abortion
      """
    When the event "stop" is sent
    Then the chart is in "stopped"

  @SM-10
  Scenario: A name that no descriptor matches is an unknown event, never a silent no-op
    Given the statechart:
      """
      statechart: descriptors
      initial: idle
      states:
        idle: {}
        aborted: {}
      transitions:
        - {trigger: abort, source: idle, dest: aborted}
        - {trigger: reset, source: "*", dest: idle}
      """
    When the event "abortive" is sent
    Then Orion reports an error containing "unknown trigger 'abortive'"
    And the chart is in "idle"
    When the event "abort.now" is sent
    Then the chart is in "aborted"

  @SM-11
  Scenario: Events that keep leading back to themselves stop after 10,000, where they are, and what is left queued is reported
    Given the statechart:
      """
      statechart: spin
      initial: idle
      states:
        idle: {}
        spinning: {entry: send_again}
      transitions:
        - {trigger: go, source: idle, dest: spinning}
        - {trigger: again, source: spinning, dest: spinning, guards: always}
        - {trigger: stop, source: spinning, dest: idle}
      """
    When the event "go" is sent
    Then Orion reports an error containing "trigger 'go' did not come to rest within 10,000 microsteps (state 'spinning'; still queued: again)"
    And the chart is in "spinning"
    And the action "send again" ran 10,001 times
    And the event "again" was discarded because "the trigger did not come to rest"
    When the event "stop" is sent
    Then the chart is in "idle"
