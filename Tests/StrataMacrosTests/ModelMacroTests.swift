import SwiftParser
import SwiftSyntax
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

@testable import StrataMacros

/// Expected expansions of the model macros, and their diagnostics.
final class ModelMacroTests: XCTestCase {
    let macros: [String: any Macro.Type] = [
        "Model": ModelMacro.self,
        "_PersistedProperty": PersistedPropertyMacro.self,
        "Attribute": MarkerMacro.self,
        "Transient": MarkerMacro.self,
        "Unique": ConstraintMacro.self,
        "ModelActor": ModelActorMacro.self,
    ]

    func testModelExpansion() {
        assertMacroExpansion(
            """
            @Model
            final class Note {
                #Unique<Note>([\\.title])
                @Attribute(.unique) var title: String
                var count = 0
                @Transient var cache = ""
                var summary: String { title }
                init(title: String) { self.title = title }
            }
            """,
            expandedSource: """
                final class Note {
                    var title: String {
                        @storageRestrictions(initializes: _title)
                        init(initialValue) {
                            _title = initialValue
                        }
                        get {
                            _strataState.access(self, keyPath: \\.title)
                            if _strataState.hasFaults {
                                _strataState.loadIfUnloaded(self, field: _StrataFields.first + 0)
                                _strataState.resolve(&_title, field: _StrataFields.first + 0)
                            }
                            return _title
                        }
                        set {
                            if _strataState.hasFaults {
                                _strataState.loadBeforeSet(self, field: _StrataFields.first + 0)
                            }
                            let _old = _strataState.willSet(&self._title, field: _StrataFields.first + 0)
                            _strataState.registerUndo(self, keyPath: \\.title, old: self._title)
                            _strataState.withMutation(of: self, keyPath: \\.title) {
                                self._title = newValue
                            }
                            _strataState.didChange(self, field: _StrataFields.first + 0)
                            _strataState.didSet(self, field: _StrataFields.first + 0, old: _old, new: newValue)
                        }
                    }

                    nonisolated(unsafe) private var _title: String
                    var count {
                        @storageRestrictions(initializes: _count)
                        init(initialValue) {
                            _count = initialValue
                        }
                        get {
                            _strataState.access(self, keyPath: \\.count)
                            if _strataState.hasFaults {
                                _strataState.loadIfUnloaded(self, field: _StrataFields.first + 1)
                                _strataState.resolve(&_count, field: _StrataFields.first + 1)
                            }
                            return _count
                        }
                        set {
                            if _strataState.hasFaults {
                                _strataState.loadBeforeSet(self, field: _StrataFields.first + 1)
                            }
                            let _old = _strataState.willSet(&self._count, field: _StrataFields.first + 1)
                            _strataState.registerUndo(self, keyPath: \\.count, old: self._count)
                            _strataState.withMutation(of: self, keyPath: \\.count) {
                                self._count = newValue
                            }
                            _strataState.didChange(self, field: _StrataFields.first + 1)
                            _strataState.didSet(self, field: _StrataFields.first + 1, old: _old, new: newValue)
                        }
                    }

                    nonisolated(unsafe) private var _count = 0
                    var cache = ""
                    var summary: String { title }
                    init(title: String) { self.title = title }

                    nonisolated let _strataState = Strata._ModelState()

                    /// Where the class's persisted fields lie among its entity's.
                    nonisolated enum _StrataFields {
                        nonisolated static var first: Int {
                            0
                        }
                        nonisolated static var end: Int {
                            first + 2
                        }
                    }

                    nonisolated class var _strataEntityName: String {
                        "Note"
                    }

                    nonisolated static func _strataProperties<Root: Note>(of root: Root.Type) -> [Strata.Schema.PropertyMetadata] {
                        [
                            Strata.Schema.PropertyMetadata(name: "title", keypath: \\Root.title, defaultValue: nil, metadata: Strata.Schema.Attribute(.unique)),
                            Strata.Schema.PropertyMetadata(name: "count", keypath: \\Root.count, defaultValue: (0), metadata: nil)
                        ]
                    }

                    nonisolated class var schemaMetadata: [Strata.Schema.PropertyMetadata] {
                        _strataProperties(of: Note.self)
                    }

                    nonisolated class var _strataUniqueness: [[AnyKeyPath]] {
                        let groups: [[PartialKeyPath<Note>]] = [[\\.title]]
                        return groups
                    }

                    nonisolated class var _strataIndexes: [[AnyKeyPath]] {
                        let groups: [[PartialKeyPath<Note>]] = []
                        return groups
                    }

                    nonisolated required init(_strataReader reader: inout Strata._RecordReader) throws {
                        self._title = try reader.decode((String).self, field: 0, state: _strataState)
                        self._count = try reader.decode(Swift.type(of: self._count), field: 1, state: _strataState)
                    }

                    nonisolated func _strataLoad(from reader: inout Strata._RecordReader, fields: Strata._FieldSet?) throws {
                        let __title = try fields?.contains(0) == false ? self._title : reader.decode((String).self, field: 0, state: _strataState)
                        let __count = try fields?.contains(1) == false ? self._count : reader.decode(Swift.type(of: self._count), field: 1, state: _strataState)
                        if fields?.contains(0) != false {
                            _strataState.withMutation(of: self, keyPath: \\.title) {
                                self._title = __title
                            }
                        }
                        if fields?.contains(1) != false {
                            _strataState.withMutation(of: self, keyPath: \\.count) {
                                self._count = __count
                            }
                        }
                    }

                    nonisolated func _strataWrite(to writer: inout Strata._RecordWriter) {
                        writer.encode(self._title, field: 0, state: _strataState)
                        writer.encode(self._count, field: 1, state: _strataState)
                    }

                    nonisolated func _strataSetRelationship(field: Int, to value: Any?) {
                        switch field {
                        case 0:
                            let __value = Strata._relationshipValue(value, like: self._title)
                            if _strataState.hasFaults {
                                _strataState.loadBeforeSet(self, field: 0)
                            }
                            let _old = _strataState.willSet(&self._title, field: 0)
                            _strataState.registerUndo(self, keyPath: \\.title, old: self._title)
                            _strataState.withMutation(of: self, keyPath: \\.title) {
                                self._title = __value
                            }
                            _strataState.didChange(self, field: 0)
                            _strataState.didSet(self, field: 0, old: _old, new: __value)
                        case 1:
                            let __value = Strata._relationshipValue(value, like: self._count)
                            if _strataState.hasFaults {
                                _strataState.loadBeforeSet(self, field: 1)
                            }
                            let _old = _strataState.willSet(&self._count, field: 1)
                            _strataState.registerUndo(self, keyPath: \\.count, old: self._count)
                            _strataState.withMutation(of: self, keyPath: \\.count) {
                                self._count = __value
                            }
                            _strataState.didChange(self, field: 1)
                            _strataState.didSet(self, field: 1, old: _old, new: __value)
                        default:
                            break
                        }
                    }

                    nonisolated func _strataEditToMany(field: Int, _ edit: Strata._ToManyEdit) -> Bool {
                        switch field {
                        case 0:
                            return _strataState.withMutation(of: self, keyPath: \\.title) {
                                _strataState.edit(&self._title, field: 0, edit)
                            }
                        case 1:
                            return _strataState.withMutation(of: self, keyPath: \\.count) {
                                _strataState.edit(&self._count, field: 1, edit)
                            }
                        default:
                            return false
                        }
                    }

                    nonisolated func _strataKeyElement(field: Int) -> Strata.KeyEncoding.Element? {
                        switch field {
                        case 0:
                            return Strata._keyElement(self._title)
                        case 1:
                            return Strata._keyElement(self._count)
                        default:
                            return nil
                        }
                    }
                }
                """,
            macros: macros
        )
    }

    func testModelOnAStructIsAnError() {
        assertMacroExpansion(
            """
            @Model
            struct Point {
                var x: Int
            }
            """,
            expandedSource: """
                struct Point {
                    var x: Int
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Model can only be applied to a class; use 'class' (SwiftData models are reference types)",
                    line: 1, column: 1)
            ],
            macros: ["Model": ModelMacro.self]
        )
    }

    func testMisusedPropertiesAreReported() {
        assertMacroExpansion(
            """
            @Model class Bad {
                let id = 0
                #if DEBUG
                var debugName: String = ""
                #endif
                @Transient var cache: String
                @Attribute(.ephemeral) var selected: Bool
                init() { cache = ""; selected = false }
            }
            """,
            expandedSource: """
                class Bad {
                    let id = 0
                    #if DEBUG
                    var debugName: String = ""
                    #endif
                    var cache: String
                    @_PersistedProperty(1) var selected: Bool
                    init() { cache = ""; selected = false }
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message:
                        "a stored 'let' with an initial value cannot be read back from the store; make it 'var', or declare 'let name: Type' and set it in init",
                    line: 2, column: 5),
                DiagnosticSpec(
                    message:
                        "a @Model class cannot persist a stored property declared inside '#if'; declare it outside the '#if' block (computed properties and methods may stay inside)",
                    line: 4, column: 5),
                DiagnosticSpec(message: "a @Transient property needs a default value", line: 6, column: 5),
                DiagnosticSpec(
                    message:
                        "an @Attribute(.ephemeral) property needs a default value: it is not stored, so a loaded model starts with it",
                    line: 7, column: 5),
            ],
            macros: ["Model": ModelMacro.self, "Transient": MarkerMacro.self, "Attribute": MarkerMacro.self]
        )
    }

    func testUniqueNeedsArrayLiterals() {
        assertMacroExpansion(
            "#Unique<Note>(paths)",
            expandedSource: "#Unique<Note>(paths)",
            diagnostics: [
                DiagnosticSpec(
                    message: "each argument of #Unique and #Index must be an array literal of key paths, like [\\.name, \\.date]",
                    line: 1, column: 15)
            ],
            macros: ["Unique": ConstraintMacro.self]
        )
    }

    func testModelActorExpansion() {
        assertMacroExpansion(
            "@ModelActor actor Importer {}",
            expandedSource: """
                actor Importer {

                    nonisolated let modelExecutor: any Strata.ModelExecutor

                    nonisolated let modelContainer: Strata.ModelContainer

                    init(modelContainer: Strata.ModelContainer) {
                        let modelContext = Strata.ModelContext(modelContainer)
                        self.modelExecutor = Strata.DefaultSerialModelExecutor(modelContext: modelContext)
                        self.modelContainer = modelContainer
                    }
                }

                extension Importer: Strata.ModelActor {
                }
                """,
            macros: macros
        )
    }

    func testModelActorOnAClassIsAnError() {
        assertMacroExpansion(
            "@ModelActor class Importer {}",
            expandedSource: "class Importer {}",
            diagnostics: [DiagnosticSpec(message: "@ModelActor can only be applied to an actor", line: 1, column: 1)],
            macros: macros
        )
    }
}

/// Strata's `#Predicate` over a model: Foundation's, with `evaluate` calls
/// rewritten into a form the Linux toolchain's macro accepts. (Expanded by
/// hand: the test harness would expand the `#Foundation::Predicate` it
/// produces with this macro again.)
final class PredicateMacroTests: XCTestCase {
    private func expand(_ source: String) throws -> String {
        let parsed = Parser.parse(source: source)
        let node = try XCTUnwrap(parsed.statements.first?.item.as(MacroExpansionExprSyntax.self))
        let context = BasicMacroExpansionContext(sourceFiles: [parsed: .init(moduleName: "App", fullFilePath: "App.swift")])
        return try PredicateMacro.expansion(of: node, in: context).description
    }

    func testEvaluateCallsBecomeNilCoalescing() throws {
        XCTAssertEqual(
            try expand("#Predicate<Item> { active.evaluate($0) && !other.evaluate($0) || $0.count > limit.evaluate(size) }"),
            "#Foundation::Predicate<Item> { (active ?? $0) && !(other ?? $0) || $0.count > (limit ?? size) }")
    }

    func testAPredicateWithoutEvaluateIsFoundationsUnchanged() throws {
        XCTAssertEqual(
            try expand("#Predicate { item in item.name.contains(text) && item.tags.isEmpty }"),
            "#Foundation::Predicate { item in item.name.contains(text) && item.tags.isEmpty }")
    }

    func testEvaluateWithSeveralArgumentsOrALabelIsLeftToFoundation() throws {
        XCTAssertEqual(
            try expand("#Predicate<Item> { pair.evaluate($0, $0) || labeled.evaluate(input: $0) }"),
            "#Foundation::Predicate<Item> { pair.evaluate($0, $0) || labeled.evaluate(input: $0) }")
    }
}
