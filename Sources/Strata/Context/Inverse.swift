/// The inverse of every relationship, per model type, worked out once from
/// the types' generated metadata (no container needed, so detached models
/// are kept in sync too).
///
/// The inverse of relationship `F` of `A`, pointing at `B`, is:
/// 1. the property `F` names with `inverse:`;
/// 2. otherwise the relationship of `B` whose `inverse:` names `F`;
/// 3. otherwise, when `A` has exactly one relationship to `B` without an
///    explicit inverse and `B` exactly one to `A`, that one (inferred, as
///    SwiftData does). A relationship of a type to itself is never its own
///    inverse.
/// Anything else has no inverse: only its own side changes.
package enum InverseGraph {
    package struct Side: @unchecked Sendable {
        package let type: any PersistentModel.Type
        package let field: Int
        package let isToOne: Bool
    }

    /// Immutable once built (key paths and metatypes), so shared freely.
    struct TypeInfo: @unchecked Sendable {
        /// Each property's key path, by field.
        var keypaths: [AnyKeyPath]
        /// The inverse of each relationship field that has one.
        var inverses: [Int: Side]
    }

    private static let cache = Locked<[ObjectIdentifier: TypeInfo]>([:])

    static func info(_ type: any PersistentModel.Type) -> TypeInfo {
        if let known = cache.withLock({ $0[ObjectIdentifier(type)] }) { return known }
        let computed = compute(type)
        cache.withLock { $0[ObjectIdentifier(type)] = computed }
        return computed
    }

    /// The inverse of relationship `field` of `type`. Runs on every
    /// relationship assignment: a known type's answer is read under the
    /// lock, without copying its whole `TypeInfo` out.
    package static func inverse(of type: any PersistentModel.Type, field: Int) -> Side? {
        let known: Side?? = cache.withLock { $0[ObjectIdentifier(type)].map { $0.inverses[field] } }
        if let known { return known }
        return info(type).inverses[field]
    }

    private struct Relation {
        let field: Int
        let keypath: AnyKeyPath
        /// The key paths of the field: rooted at the type, and at each
        /// superclass that has it (`\BusinessTrip.owner`, `\Trip.owner`),
        /// as either may name it in an `inverse:`.
        let keypaths: [AnyKeyPath]
        let destination: any PersistentModel.Type
        let isToOne: Bool
        let declaredInverse: AnyKeyPath?
    }

    private static func relations(_ type: any PersistentModel.Type) -> [Relation] {
        var inherited: [[AnyKeyPath]] = []
        var ancestor = _getSuperclass(type) as? any PersistentModel.Type
        while let superType = ancestor {
            for (field, metadata) in superType.schemaMetadata.enumerated() {
                if inherited.count <= field { inherited += Array(repeating: [], count: field + 1 - inherited.count) }
                inherited[field].append(metadata.keypath)
            }
            ancestor = _getSuperclass(superType) as? any PersistentModel.Type
        }
        return type.schemaMetadata.enumerated().compactMap { field, metadata in
            let valueType = Swift.type(of: metadata.keypath).valueType
            guard let (destination, toOne) = Schema.Relationship.destination(of: valueType) else { return nil }
            return Relation(
                field: field, keypath: metadata.keypath,
                keypaths: [metadata.keypath] + (field < inherited.count ? inherited[field] : []),
                destination: destination, isToOne: toOne,
                declaredInverse: (metadata.metadata as? Schema.Relationship)?.inverseKeyPath)
        }
    }

    private static func compute(_ type: any PersistentModel.Type) -> TypeInfo {
        let own = relations(type)
        var inverses: [Int: Side] = [:]
        for relation in own {
            let others = relations(relation.destination)
            let candidate: Relation?
            if let declared = relation.declaredInverse {
                candidate = others.first { $0.keypaths.contains(declared) }
            } else if let named = others.first(where: { $0.declaredInverse.map(relation.keypaths.contains) ?? false }) {
                candidate = named
            } else {
                let mine = own.filter { $0.destination == relation.destination && $0.declaredInverse == nil }
                let theirs = others.filter { $0.destination == type && $0.declaredInverse == nil }
                let selfInverse = relation.destination == type && theirs.first?.field == relation.field
                candidate = mine.count == 1 && theirs.count == 1 && !selfInverse ? theirs[0] : nil
            }
            if let candidate {
                inverses[relation.field] = Side(
                    type: relation.destination, field: candidate.field, isToOne: candidate.isToOne)
            }
        }
        return TypeInfo(keypaths: type.schemaMetadata.map(\.keypath), inverses: inverses)
    }
}

/// Applies the other side of a relationship change.
///
/// Each change goes through the target's generated setter, so it is
/// observed and tracked like a change the program made, with the target's
/// own inverse upkeep switched off for that one assignment (the side that
/// started the change is already up to date).
enum InverseUpkeep {
    /// The current value of relationship `field` of `model`, loaded.
    static func value(of model: any PersistentModel, field: Int) -> Any? {
        let keypaths = InverseGraph.info(type(of: model)).keypaths
        guard keypaths.indices.contains(field) else { return nil }
        return model[keyPath: keypaths[field]]
    }

    /// Whether relationship `field` of `type` is a non-optional to-one.
    static func isRequired(_ type: any PersistentModel.Type, field: Int) -> Bool {
        let keypaths = InverseGraph.info(type).keypaths
        guard keypaths.indices.contains(field) else { return false }
        return !(Swift.type(of: keypaths[field]).valueType is any _OptionalMarker.Type)
    }

    static func set(_ model: any PersistentModel, field: Int, to value: Any?) {
        let state = model._strataState
        let was = state.isApplyingInverse
        state.isApplyingInverse = true
        model._strataSetRelationship(field: field, to: value)
        state.isApplyingInverse = was
    }

    /// Adds `source` to, or removes it from, to-many `side` of `target` in
    /// place, without loading or copying the list (see
    /// ``_ModelState/edit(_:field:_:)``); false when the model's class has
    /// no generated in-place edit.
    private static func edit(
        _ target: any PersistentModel, side: InverseGraph.Side, isAdd: Bool, _ source: any PersistentModel
    ) -> Bool {
        let viaToOne = InverseGraph.inverse(of: type(of: target), field: side.field)?.isToOne ?? false
        let edit = _ToManyEdit(model: source, isAdd: isAdd, viaToOne: viaToOne)
        let state = target._strataState
        let was = state.isApplyingInverse
        state.isApplyingInverse = true
        defer { state.isApplyingInverse = was }
        guard target._strataEditToMany(field: side.field, edit) else { return false }
        state.didEditToMany(target, field: side.field)
        return true
    }

    /// `source` no longer refers to `target`: take `source` out of
    /// `target`'s relationship `side`.
    static func remove(_ source: any PersistentModel, from target: any PersistentModel, side: InverseGraph.Side) {
        if !side.isToOne, edit(target, side: side, isAdd: false, source) { return }
        let current = value(of: target, field: side.field)
        if side.isToOne {
            guard let other = current as? any PersistentModel, other === source else { return }
            if isRequired(type(of: target), field: side.field) {
                // nil is not a value a non-optional to-one can take: the
                // next save refuses, as SwiftData's validation does.
                target._strataState.link?.context?.pendingError = SwiftDataError(
                    .modelValidationFailure,
                    "\(target.persistentModelID) was taken out of a relationship, but its "
                        + "\(type(of: target))'s to-one relationship (field \(side.field)) is non-optional: "
                        + "point it at another model instead, or delete it")
                return
            }
            set(target, field: side.field, to: nil)
        } else {
            let list = current as? [any PersistentModel] ?? []
            if list.contains(where: { $0 === source }) {
                set(target, field: side.field, to: list.filter { $0 !== source })
            }
        }
    }

    /// `source` now refers to `target` through its relationship `forward`:
    /// put `source` into `target`'s relationship `side`. A to-one `side`
    /// that pointed elsewhere is moved, and the model it pointed at loses
    /// `target` from its own `forward` relationship.
    ///
    /// A to-many `side` gains `source` in place, without a membership scan:
    /// `source`'s side did not hold `target` before (the callers add only
    /// what is new on their side), and both sides are kept in step, so
    /// `target`'s side did not hold `source`.
    static func add(
        _ source: any PersistentModel, to target: any PersistentModel, side: InverseGraph.Side,
        forward: InverseGraph.Side
    ) {
        if !side.isToOne, edit(target, side: side, isAdd: true, source) { return }
        let current = value(of: target, field: side.field)
        if side.isToOne {
            let previous = current as? any PersistentModel
            if let previous, previous === source { return }
            set(target, field: side.field, to: source)
            if let previous { remove(target, from: previous, side: forward) }
        } else {
            let list = current as? [any PersistentModel] ?? []
            if !list.contains(where: { $0 === source }) { set(target, field: side.field, to: list + [source]) }
        }
    }
}

extension _ModelState {
    // Generated setters call `willSet` before and `didSet` after storing a
    // new value; overloads chosen by the property's type make both free for
    // attributes.

    /// Attributes: nothing to remember.
    @inlinable public func willSet<T>(_ value: inout T, field: Int) -> T? { nil }

    /// A to-one relationship: its current target, loaded.
    public func willSet<T: PersistentModel>(_ value: inout T?, field: Int) -> T?? {
        resolve(&value, field: field)
        return .some(value)
    }

    /// A to-many relationship: its current targets, loaded.
    public func willSet<T: PersistentModel>(_ value: inout [T], field: Int) -> [T]? {
        resolve(&value, field: field)
        if status == .saved, toManyBaselines[field] == nil {
            if let delta = toManyDeltas.removeValue(forKey: field) {
                // Edited in place since the save: the baseline is the list
                // as it was before those edits.
                toManyBaselines[field] = delta.undone(value.map(\._strataState.rowID))
            } else if !changedFields.contains(field) {
                toManyBaselines[field] = value.map(\._strataState.rowID)
            }
        }
        return value
    }

    /// A non-optional to-one relationship: its current target (loaded
    /// with the model).
    public func willSet<T: PersistentModel>(_ value: inout T, field: Int) -> T? { value }

    /// An optional to-many relationship: its current targets, loaded.
    public func willSet<T: PersistentModel>(_ value: inout [T]?, field: Int) -> [T]?? {
        var list = value ?? []
        let old = willSet(&list, field: field)
        if value != nil || !list.isEmpty { value = list }
        return .some(old)
    }

    /// Attributes: nothing to sync.
    @inlinable public func didSet<M, T>(_ model: M, field: Int, old: T?, new: T) {}

    /// A to-one relationship changed: update the inverse on the old and
    /// the new target.
    public func didSet<M: PersistentModel, T: PersistentModel>(_ model: M, field: Int, old: T??, new: T?) {
        inverseInStep.insert(field)
        if let new, new._strataState.status == .detached { mayReferenceDetached = true }
        guard !isApplyingInverse, let side = InverseGraph.inverse(of: M.self, field: field) else { return }
        let previous = old ?? nil
        if previous === new { return }
        let forward = InverseGraph.Side(type: M.self, field: field, isToOne: true)
        if let previous { InverseUpkeep.remove(model, from: previous, side: side) }
        if let new { InverseUpkeep.add(model, to: new, side: side, forward: forward) }
    }

    /// A non-optional to-one relationship changed: as an optional one.
    public func didSet<M: PersistentModel, T: PersistentModel>(_ model: M, field: Int, old: T?, new: T) {
        didSet(model, field: field, old: Optional(old), new: Optional(new))
    }

    /// An optional to-many relationship changed: as a to-many, nil being
    /// no targets.
    public func didSet<M: PersistentModel, T: PersistentModel>(_ model: M, field: Int, old: [T]??, new: [T]?) {
        didSet(model, field: field, old: old.map { $0 ?? [] }, new: new ?? [])
    }

    /// A to-many relationship changed: update the inverse on each target
    /// removed and each target added.
    public func didSet<M: PersistentModel, T: PersistentModel>(_ model: M, field: Int, old: [T]?, new: [T]) {
        inverseInStep.insert(field)
        mayReferenceDetached = true
        guard !isApplyingInverse, let side = InverseGraph.inverse(of: M.self, field: field) else { return }
        let before = old ?? []
        let kept = Set(before.map(ObjectIdentifier.init)).intersection(new.map(ObjectIdentifier.init))
        let forward = InverseGraph.Side(type: M.self, field: field, isToOne: false)
        for target in before where !kept.contains(ObjectIdentifier(target)) {
            InverseUpkeep.remove(model, from: target, side: side)
        }
        var added: Set<ObjectIdentifier> = kept
        for target in new where added.insert(ObjectIdentifier(target)).inserted {
            InverseUpkeep.add(model, to: target, side: side, forward: forward)
        }
    }
}

// Generated `_strataSetRelationship(field:to:)` assigns a relationship
// through these, chosen by the property's type; for an attribute the
// catch-all keeps the current value (never called for one).

/// A to-one relationship's new target.
@inlinable public func _relationshipValue<T: PersistentModel>(_ value: Any?, like current: T?) -> T? { value as? T }

/// A non-optional to-one relationship: it is never set to nil.
@inlinable public func _relationshipValue<T: PersistentModel>(_ value: Any?, like current: T) -> T { value as? T ?? current }

/// A to-many relationship's new targets.
@inlinable public func _relationshipValue<T: PersistentModel>(_ value: Any?, like current: [T]) -> [T] {
    _relationshipList(value) ?? []
}

/// An optional to-many relationship's new targets.
@inlinable public func _relationshipValue<T: PersistentModel>(_ value: Any?, like current: [T]?) -> [T]? {
    _relationshipList(value) ?? (current == nil ? nil : [])
}

/// Not a relationship.
@inlinable public func _relationshipValue<T>(_ value: Any?, like current: T) -> T { current }

@usableFromInline func _relationshipList<T: PersistentModel>(_ value: Any?) -> [T]? {
    if let list = value as? [T] { return list }
    if let list = value as? [any PersistentModel] { return list.compactMap { $0 as? T } }
    return nil
}

/// One member added to or removed from a to-many to keep an inverse in
/// step (see ``PersistentModel/_strataEditToMany(field:_:)``). Not for
/// direct use.
public struct _ToManyEdit {
    let model: any PersistentModel
    let isAdd: Bool
    /// True when the other side is a to-one: the list is then read from
    /// that to-one's index, and a save needs no pairs of its own.
    let viaToOne: Bool
}

/// Models in order, the first held inline: most lists gain one member
/// between saves, and a list of one then allocates nothing.
struct InlineModels: RandomAccessCollection {
    /// Nil only while the list is empty.
    private var first: (any PersistentModel)?
    private var rest: [any PersistentModel] = []

    var startIndex: Int { 0 }
    var endIndex: Int { first == nil ? 0 : 1 + rest.count }

    subscript(position: Int) -> any PersistentModel {
        if position == 0, let first { return first }
        return rest[position - 1]
    }

    mutating func append(_ model: any PersistentModel) {
        if first == nil { first = model } else { rest.append(model) }
    }

    mutating func remove(at position: Int) {
        if position == 0 {
            first = rest.isEmpty ? nil : rest.removeFirst()
        } else {
            rest.remove(at: position - 1)
        }
    }
}

/// The members a to-many gained and lost through in-place edits since it
/// was last loaded or saved.
struct ToManyDelta {
    private(set) var added = InlineModels()
    /// The identities of `added`: empty while it holds no more than
    /// `scanLimit` members (a short scan costs less than a hash table,
    /// and most lists gain one member per parent between saves), every
    /// one of them from then on.
    private var addedIDs: Set<ObjectIdentifier> = []
    private var removedIDs: Set<ObjectIdentifier> = []
    /// The stored rows of the members removed.
    private(set) var removedRows: Set<Int64> = []

    private static let scanLimit = 8

    private func isAdded(_ id: ObjectIdentifier) -> Bool {
        addedIDs.isEmpty ? added.contains { ObjectIdentifier($0) == id } : addedIDs.contains(id)
    }

    mutating func add(_ model: any PersistentModel) {
        let id = ObjectIdentifier(model)
        if !removedIDs.isEmpty, removedIDs.remove(id) != nil {
            // A member before, removed since: back as it was.
            removedRows.remove(model._strataState.rowID)
            return
        }
        if isAdded(id) { return }
        added.append(model)
        if !addedIDs.isEmpty {
            addedIDs.insert(id)
        } else if added.count > Self.scanLimit {
            addedIDs = Set(added.map(ObjectIdentifier.init))
        }
    }

    mutating func remove(_ model: any PersistentModel) {
        let id = ObjectIdentifier(model)
        if isAdded(id) {
            // Added since: it was not a member before.
            if let index = added.lastIndex(where: { $0 === model }) { added.remove(at: index) }
            addedIDs.remove(id)
            return
        }
        removedIDs.insert(id)
        if model._strataState.rowID > 0 { removedRows.insert(model._strataState.rowID) }
    }

    /// True when `model` was removed.
    func removes(_ model: any PersistentModel) -> Bool { removedIDs.contains(ObjectIdentifier(model)) }

    /// True when the member of stored row `row` was removed.
    func removes(row: Int64) -> Bool { removedRows.contains(row) }

    /// Appends the members added that `list` does not hold yet.
    func addMissing<T: PersistentModel>(to list: inout [T]) {
        guard !added.isEmpty else { return }
        var present = Set(list.map(ObjectIdentifier.init))
        for model in added where present.insert(ObjectIdentifier(model)).inserted {
            if let typed = model as? T { list.append(typed) }
        }
    }

    /// `rows`, the list's rows now, as they were before the edits.
    func undone(_ rows: [Int64]) -> [Int64] {
        let addedRows = Set(added.map(\._strataState.rowID))
        return rows.filter { !addedRows.contains($0) } + removedRows.sorted()
    }
}

extension _ModelState {
    /// Attributes and to-ones: not a list to edit.
    @inlinable public func edit<T>(_ value: inout T, field: Int, _ edit: _ToManyEdit) -> Bool { false }

    /// An optional to-many: as a to-many, nil being no members.
    public func edit<T: PersistentModel>(_ value: inout [T]?, field: Int, _ edit: _ToManyEdit) -> Bool {
        let wasNil = value == nil
        // Taken out, so that the list has one owner and changes in place.
        var list = value.take() ?? []
        let done = self.edit(&list, field: field, edit)
        if !wasNil || !list.isEmpty { value = list }
        return done
    }

    /// A to-many: a list not loaded keeps the edit for when it is; a loaded
    /// one changes in place (a stored many-to-many also keeps the edit for
    /// the save, which then writes its pairs and reads nothing else).
    public func edit<T: PersistentModel>(_ value: inout [T], field: Int, _ edit: _ToManyEdit) -> Bool {
        let faulted = faults[field] != nil
        if edit.isAdd, edit.model._strataState.status == .detached { mayReferenceDetached = true }
        if faulted || (status == .saved && !edit.viaToOne && toManyBaselines[field] == nil) {
            if edit.isAdd {
                toManyDeltas[field, default: ToManyDelta()].add(edit.model)
            } else {
                toManyDeltas[field, default: ToManyDelta()].remove(edit.model)
            }
            if faulted { return true }
        }
        if edit.isAdd {
            if let typed = edit.model as? T { value.append(typed) }
        } else {
            // Every copy: a list the program appended a member to twice
            // holds it twice.
            value.removeAll { $0 === edit.model }
        }
        return true
    }

    /// True when relationship `field` is not loaded and not edited since:
    /// what the store holds is its value.
    func isStoredAsIs(_ field: Int) -> Bool { faults[field] != nil && toManyDeltas[field] == nil }

    /// After an in-place edit of to-many `field`: as ``didChange(_:field:)``,
    /// but a list not loaded stays so.
    func didEditToMany(_ model: any PersistentModel, field: Int) { recordChange(model, field: field) }
}
