import Foundation

// What insert and delete do for undo: open a group, register the undo
// action, and load what a deleted model's undo must bring back.

extension ModelContext {
    /// Opens an undo group when changes are recorded; true when it did.
    func beginUndoGroup() -> Bool {
        guard let undoManager, link.recordsUndo, undoManager.isUndoRegistrationEnabled else { return false }
        undoManager.beginUndoGrouping()
        return true
    }

    /// Records `action` as the undo of a change to `model`.
    func registerUndo<T: PersistentModel>(_ model: T, _ action: @escaping (ModelContext, T) -> Void) {
        guard let undoManager, link.recordsUndo else { return }
        undoManager.registerUndo(withTarget: self) { context in action(context, model) }
    }

    /// Before a saved model is deleted with undo on: its relationships are
    /// loaded (so that a re-insert writes them), and the models its
    /// `.cascade` rules reach are deleted now, as models, so that undo
    /// brings them back too.
    func prepareUndoableDelete(_ model: some PersistentModel) {
        guard undoManager != nil, link.recordsUndo, let entity = container.schema.entity(forType: type(of: model)) else {
            return
        }
        for relationship in entity.relationships {
            let targets = Self.targets(of: model, relationship)
            if relationship.deleteRule == .cascade {
                for target in targets where target._strataState.status == .saved { deleteExistential(target) }
            }
        }
    }
}
