/// Makes a class a persistent model: its stored `var` properties are kept
/// in the store, observed (the class conforms to `Observable`) and tracked
/// for changes by the ``ModelContext`` the model is inserted into.
///
/// Each persisted property needs an explicit type, or a literal default
/// from which one is inferred. Computed, `static` and ``Transient()``
/// properties are not persisted. The class needs an initializer of its own,
/// as with SwiftData.
@attached(
    member,
    conformances: PersistentModel, Observable,
    names: named(_strataState), named(schemaMetadata), named(_strataUniqueness),
    named(_strataIndexes), named(init), named(_strataLoad), named(_strataWrite), named(_strataEntityName),
    named(_strataKeyElement), named(_strataSetRelationship), named(_strataEditToMany), named(_StrataFields),
    named(_strataProperties)
)
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Observable)
public macro Model() = #externalMacro(module: "StrataMacros", type: "ModelMacro")

/// Added by ``Model()`` to each persisted property; not for direct use.
@attached(accessor, names: named(init), named(get), named(set))
@attached(peer, names: prefixed(_))
public macro _PersistedProperty(_ field: Int) = #externalMacro(module: "StrataMacros", type: "PersistedPropertyMacro")

/// Customizes how a property is stored: uniqueness, external storage,
/// a rename during migration (`originalName`), or a forced new version
/// hash (`hashModifier`).
@attached(peer)
public macro Attribute(
    _ options: Schema.Attribute.Option...,
    originalName: String? = nil,
    hashModifier: String? = nil
) = #externalMacro(module: "StrataMacros", type: "MarkerMacro")

/// Describes a relationship: its delete rule, its inverse, and the number
/// of related models it must hold.
@attached(peer)
public macro Relationship(
    _ options: Schema.Relationship.Option...,
    deleteRule: Schema.Relationship.DeleteRule = .nullify,
    minimumModelCount: Int? = 0,
    maximumModelCount: Int? = 0,
    originalName: String? = nil,
    inverse: AnyKeyPath? = nil,
    hashModifier: String? = nil
) = #externalMacro(module: "StrataMacros", type: "MarkerMacro")

/// Keeps a property out of the store. It needs a default value.
@attached(peer)
public macro Transient() = #externalMacro(module: "StrataMacros", type: "MarkerMacro")

/// Declares groups of properties whose values are unique together; a model
/// inserted with the values of a stored one updates that one (upsert).
@freestanding(declaration)
public macro Unique<T>(_ constraints: [PartialKeyPath<T>]...) =
    #externalMacro(module: "StrataMacros", type: "ConstraintMacro") where T: PersistentModel

/// Declares B-tree indexes, each over one property or a compound of several.
@freestanding(declaration)
public macro Index<T>(_ indices: [PartialKeyPath<T>]...) =
    #externalMacro(module: "StrataMacros", type: "ConstraintMacro") where T: PersistentModel

/// Makes an actor own a ``ModelContext`` on a container and run on that
/// context's serial executor, so that model work happens off the main actor.
@attached(member, names: named(modelExecutor), named(modelContainer), named(init))
@attached(extension, conformances: ModelActor)
public macro ModelActor() = #externalMacro(module: "StrataMacros", type: "ModelActorMacro")

#if !canImport(Darwin)
    /// A predicate over a model: Foundation's `#Predicate`, where a
    /// predicate may also call another predicate or `#Expression` with
    /// `evaluate` (as Foundation allows on Apple platforms; the macro of
    /// Linux's toolchain does not). Swift picks this one for a predicate of
    /// one model type, and Foundation's for the rest.
    @freestanding(expression)
    public macro Predicate<T: PersistentModel>(_ body: (T) -> Bool) -> Foundation.Predicate<T> =
        #externalMacro(module: "StrataMacros", type: "PredicateMacro")
#endif
