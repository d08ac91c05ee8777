#if !canImport(Darwin)
    /// Records changes so that they can be undone and redone: Foundation's
    /// `UndoManager`, which Foundation on Linux does not have.
    ///
    /// Strata declares it only where Foundation lacks it, with Foundation's
    /// API, so code written for Apple platforms compiles unchanged. A
    /// ``ModelContext`` with an ``ModelContext/undoManager`` registers its
    /// inserts, deletes and property changes here.
    ///
    /// Actions are kept in groups; ``undo()`` reverts the last group and
    /// ``redo()`` applies it again. There is no run loop to group by event
    /// on Linux, so ``groupsByEvent`` is false: group explicitly with
    /// ``beginUndoGrouping()`` and ``endUndoGrouping()``; an action
    /// registered outside any group is a group of its own.
    ///
    /// Like Foundation's, an undo manager is not thread-safe: use it from
    /// one thread (the context's).
    open class UndoManager {
        private struct Action {
            weak var target: AnyObject?
            let run: (AnyObject) -> Void
        }

        private final class Group {
            var actions: [Action] = []
            var name = ""
        }

        private var undoStack: [Group] = []
        private var redoStack: [Group] = []
        /// Groups being built, outermost first.
        private var open: [Group] = []
        private var disabled = 0

        /// Whether groups open and close with the run loop's events: false
        /// on Linux, which has no run loop to group by.
        open var groupsByEvent = false

        /// The most groups kept for undo; 0 for no limit.
        open var levelsOfUndo = 0 {
            didSet { trim() }
        }

        /// Whether an ``undo()`` is running (its changes register redo
        /// actions).
        open private(set) var isUndoing = false
        /// Whether a ``redo()`` is running.
        open private(set) var isRedoing = false

        /// An undo manager with nothing recorded.
        public init() {}

        /// How many groups are open.
        open var groupingLevel: Int { open.count }

        /// Whether there is something to undo: a recorded group, or an open
        /// group with actions.
        open var canUndo: Bool { !undoStack.isEmpty || open.contains { !$0.actions.isEmpty } }
        /// Whether there is an undone group to redo.
        open var canRedo: Bool { !redoStack.isEmpty }

        /// Opens a group: actions registered until the matching
        /// ``endUndoGrouping()`` are undone together.
        open func beginUndoGrouping() {
            open.append(Group())
        }

        /// Closes the innermost group.
        open func endUndoGrouping() {
            guard let group = open.popLast() else { return }
            if let outer = open.last {
                outer.actions += group.actions
                if outer.name.isEmpty { outer.name = group.name }
            } else {
                push(group)
            }
        }

        /// Records `handler`, called with `target` when the action is
        /// undone (or redone).
        open func registerUndo<TargetType: AnyObject>(
            withTarget target: TargetType, handler: @escaping (TargetType) -> Void
        ) {
            guard disabled == 0 else { return }
            let action = Action(target: target) { object in
                if let object = object as? TargetType { handler(object) }
            }
            if let group = open.last {
                group.actions.append(action)
            } else {
                let group = Group()
                group.actions.append(action)
                push(group)
            }
        }

        /// Stops recording (nested: each call needs an
        /// ``enableUndoRegistration()``).
        open func disableUndoRegistration() { disabled += 1 }

        /// Ends one `disableUndoRegistration()`; recording resumes once every
        /// one is matched.
        open func enableUndoRegistration() { disabled = max(disabled - 1, 0) }

        /// Whether actions are recorded: no `disableUndoRegistration()` is in
        /// effect.
        open var isUndoRegistrationEnabled: Bool { disabled == 0 }

        /// Closes the open groups, then reverts the last group.
        open func undo() {
            while !open.isEmpty { endUndoGrouping() }
            guard let group = undoStack.popLast() else { return }
            isUndoing = true
            let redo = run(group)
            isUndoing = false
            if !redo.actions.isEmpty { redoStack.append(redo) }
        }

        /// Reverts the last group (Foundation's `undoNestedGroup`, here the
        /// same as ``undo()``).
        open func undoNestedGroup() { undo() }

        /// Applies the last undone group again.
        open func redo() {
            guard let group = redoStack.popLast() else { return }
            isRedoing = true
            let undo = run(group)
            isRedoing = false
            if !undo.actions.isEmpty {
                undoStack.append(undo)
                trim()
            }
        }

        /// Runs `group`'s actions, last first, gathering what they register
        /// into a group of the same name.
        private func run(_ group: Group) -> Group {
            let collected = Group()
            collected.name = group.name
            open.append(collected)
            for action in group.actions.reversed() {
                if let target = action.target { action.run(target) }
            }
            open.removeLast()
            return collected
        }

        private func push(_ group: Group) {
            guard !group.actions.isEmpty else { return }
            undoStack.append(group)
            if !isRedoing { redoStack.removeAll() }
            trim()
        }

        private func trim() {
            if levelsOfUndo > 0, undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
        }

        /// Forgets every action.
        open func removeAllActions() {
            undoStack = []
            redoStack = []
            open = []
        }

        /// Forgets the actions registered with `target`.
        open func removeAllActions(withTarget target: AnyObject) {
            for group in undoStack + redoStack + open { group.actions.removeAll { $0.target === target } }
            undoStack.removeAll { $0.actions.isEmpty }
            redoStack.removeAll { $0.actions.isEmpty }
        }

        /// Names the group being built (or the last one registered).
        open func setActionName(_ actionName: String) {
            (open.last ?? undoStack.last)?.name = actionName
        }

        /// The name of the group `undo()` reverts; empty when there is none or
        /// it has no name.
        open var undoActionName: String { undoStack.last?.name ?? "" }
        /// The name of the group `redo()` applies; empty when there is none or
        /// it has no name.
        open var redoActionName: String { redoStack.last?.name ?? "" }

        /// The title of an Undo menu item for `undoActionName`.
        open var undoMenuItemTitle: String { undoMenuTitle(forUndoActionName: undoActionName) }
        /// The title of a Redo menu item for `redoActionName`.
        open var redoMenuItemTitle: String { redoMenuTitle(forUndoActionName: redoActionName) }

        /// "Undo" followed by `actionName`, or "Undo" alone when it is empty
        /// (in English only).
        open func undoMenuTitle(forUndoActionName actionName: String) -> String {
            actionName.isEmpty ? "Undo" : "Undo \(actionName)"
        }

        /// "Redo" followed by `actionName`, or "Redo" alone when it is empty
        /// (in English only).
        open func redoMenuTitle(forUndoActionName actionName: String) -> String {
            actionName.isEmpty ? "Redo" : "Redo \(actionName)"
        }
    }
#endif
