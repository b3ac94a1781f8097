/*
 * Tracelake's QueryExecutionListener, compiled inside the driver's JVM by Janino (the compiler
 * Spark ships for its own code generation), so no jar is installed and no Python runs on the
 * listener bus. For every action it appends one JSON line to a journal segment: the analyzed
 * plan's JSON (TreeNode.toJSON's format, written here: see planJson), the facts that JSON leaves null (a relation's files, a write's path, format,
 * mode and schema), and the action's timing; a failed action writes its exception's class.
 * Python reads the segments (tracelake.collect.spark_listener.CaptureJournal). Nothing here may
 * fail the user's job: every Throwable is caught and written down as its class, never a message.
 *
 * Janino compiles Java without generics or lambdas: collections are raw and cast.
 */

import java.io.File;
import java.io.FileOutputStream;
import java.io.StringWriter;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.jdbc.JDBCRelation;
import org.apache.spark.sql.sources.BaseRelation;

public class TracelakeCapture implements org.apache.spark.sql.util.QueryExecutionListener {

    private static final int RELATION_CACHE_LIMIT = 10000;
    private static final int RDD_WALK_LIMIT = 100000;
    private static final String INPUT_DIRS = "mapreduce.input.fileinputformat.inputdir";
    private static final Object[] NO_ARGS = new Object[0];
    private static final Class[] NO_TYPES = new Class[0];
    // A class's constructor parameter names, by class: what makes Spark's own toJSON slow is
    // asking Scala reflection for them again for every node (~0.15 ms a class, each time).
    private static final Map FIELD_NAMES = new HashMap();
    private static final Map OWN_JSON_FIELDS = new HashMap();  // class → Boolean: overrides jsonFields
    private static Method parseToJson;
    private static Method shouldConvertToJson;

    private final ObjectMapper mapper = new ObjectMapper();
    // relation details by the relation's output exprIds: a DataFrame read once, used by many
    // actions, is looked at once
    private final Map relations = new HashMap();
    private final Set wrapperWrites = new HashSet();
    private final Set writeCommands = new HashSet();
    private final Set lifecycleCommands = new HashSet();
    private String nestedWrite = "";
    private String directory;
    private long segmentBytes = 16L << 20;
    private int segment = 0;
    private long written = 0;
    private FileOutputStream out;
    private boolean closed = false;
    private boolean verifyPlanJson = false;
    private static long plansCompared = 0;
    private static long plansDiffering = 0;

    /** Start journalling `session`'s actions into `directory`, skipping what Python's
     * spark_lineage says moves no data (the sets comma-joined). One py4j call. */
    public synchronized void open(
            org.apache.spark.sql.SparkSession session,
            String directory,
            String nestedWrite,
            String wrapperWrites,
            String writeCommands,
            String lifecycleCommands)
            throws java.io.IOException {
        this.directory = directory;
        this.nestedWrite = nestedWrite;
        addAll(this.wrapperWrites, wrapperWrites);
        addAll(this.writeCommands, writeCommands);
        addAll(this.lifecycleCommands, lifecycleCommands);
        this.out = new FileOutputStream(segmentFile(0), true);
        session.listenerManager().register(this);
    }

    public synchronized void setSegmentBytes(long bytes) {
        this.segmentBytes = bytes;
    }

    /** Stop journalling `session`'s actions; what is written stays for Python to read. */
    public void close(org.apache.spark.sql.SparkSession session) throws java.io.IOException {
        session.listenerManager().unregister(this);  // outside the lock: the bus may be calling us
        synchronized (this) {
            closed = true;
            if (out != null) {
                out.close();
            }
        }
    }

    // -- QueryExecutionListener --------------------------------------------------------------

    public synchronized void onSuccess(String funcName, QueryExecution qe, long durationNs) {
        if (closed || funcName.equals(nestedWrite)) {
            return;  // the command that ran it reports the same write, naming its table
        }
        long started = System.nanoTime();
        try {
            LogicalPlan plan = qe.analyzed();
            String root = plan.nodeName();
            boolean lifecycle = lifecycleCommands.contains(root);
            if (wrapperWrites.contains(root)
                    || (root.endsWith("Command") && !writeCommands.contains(root) && !lifecycle)) {
                return;  // SET, SHOW, temp views: no data moves, no table changes
            }
            List problems = new ArrayList();
            String json = planJson(plan, problems);
            ObjectNode found = mapper.createObjectNode();
            collectRelations(plan, found, problems);
            ObjectNode command = lifecycle ? tableAfter(plan, qe, problems) : writeTarget(plan, problems);
            ObjectNode line = mapper.createObjectNode();
            line.put("kind", "success");
            line.put("func", funcName);
            line.put("at_ms", System.currentTimeMillis());
            line.put("duration_ns", durationNs);
            line.set("relations", found);
            line.set("command", command);
            writeWithPlan(line, problems, started, json);
        } catch (Throwable error) {
            report("error", funcName, error);
        }
    }

    /** The line `onSuccess` would journal for `qe`, returned instead of written: the lineage of
     * a DataFrame handed to Python (`toPandas`), wanted at once and by a listener never opened. */
    public synchronized String describe(String funcName, QueryExecution qe) throws Exception {
        long started = System.nanoTime();
        LogicalPlan plan = qe.analyzed();
        List problems = new ArrayList();
        String json = planJson(plan, problems);
        ObjectNode found = mapper.createObjectNode();
        collectRelations(plan, found, problems);
        ObjectNode line = mapper.createObjectNode();
        line.put("kind", "success");
        line.put("func", funcName);
        line.put("at_ms", System.currentTimeMillis());
        line.put("duration_ns", 0L);
        line.set("relations", found);
        line.set("command", mapper.createObjectNode());
        return lineWithPlan(line, problems, started, json);
    }

    public synchronized void onFailure(String funcName, QueryExecution qe, Exception exception) {
        if (!closed) {
            report("failure", funcName, exception);
        }
    }

    // -- the plan's JSON -----------------------------------------------------------------------

    /** Check every plan's JSON against Spark's own toJSON, which is then written on a difference
     * (with the problem "plan_json differs"): for a Spark version this was not tried on. */
    public synchronized void setVerifyPlanJson(boolean verify) {
        this.verifyPlanJson = verify;
    }

    /** Plans compared and found different in verify mode, by every listener of this JVM. */
    public static synchronized long[] planJsonChecks() {
        return new long[] {plansCompared, plansDiffering};
    }

    private String planJson(LogicalPlan plan, List problems) {
        String json;
        try {
            json = planJson(plan);
        } catch (Throwable error) {
            problems.add("plan_json " + error.getClass().getName());
            return plan.toJSON();
        }
        if (verifyPlanJson) {
            String spark = plan.toJSON();
            synchronized (TracelakeCapture.class) {
                plansCompared += 1;
                if (!spark.equals(json)) {
                    plansDiffering += 1;
                }
            }
            if (!spark.equals(json)) {
                problems.add("plan_json differs");
                return spark;
            }
        }
        return json;
    }

    /** `node.toJSON()`, written the way Spark's TreeNode writes it (jsonValue, jsonFields and
     * parseToJson, case by case in their order) but with each class's field names looked up
     * once. Values Spark renders without reflection (doubles, storage levels, truncated
     * string lists) are handed to its own parseToJson. */
    public String planJson(TreeNode node) throws Exception {
        StringWriter text = new StringWriter();
        JsonGenerator out = mapper.getFactory().createGenerator(text);
        writeTree(out, node);
        out.close();
        return text.toString();
    }

    /** TreeNode.jsonValue: the tree's nodes in pre-order, children as indexes. */
    private void writeTree(JsonGenerator out, TreeNode root) throws Exception {
        out.writeStartArray();
        ArrayList pending = new ArrayList();
        pending.add(root);
        while (!pending.isEmpty()) {
            TreeNode node = (TreeNode) pending.remove(pending.size() - 1);
            writeNode(out, node);
            scala.collection.immutable.Seq children = node.children();
            for (int i = children.length() - 1; i >= 0; i--) {
                pending.add(children.apply(i));
            }
        }
        out.writeEndArray();
    }

    private void writeNode(JsonGenerator out, TreeNode node) throws Exception {
        out.writeStartObject();
        out.writeStringField("class", node.getClass().getName());
        out.writeNumberField("num-children", node.children().length());
        if (ownsJsonFields(node.getClass())) {  // Literal: its value as a string
            scala.collection.Iterator fields = node.jsonFields().iterator();
            while (fields.hasNext()) {
                scala.Tuple2 field = (scala.Tuple2) fields.next();
                if (!(field._2() instanceof org.json4s.JNothing$)) {
                    out.writeFieldName((String) field._1());
                    out.writeRawValue(org.json4s.jackson.JsonMethods$.MODULE$.compact((org.json4s.JValue) field._2()));
                }
            }
            out.writeEndObject();
            return;
        }
        String[] names = fieldNames(node.getClass());
        ArrayList values = new ArrayList();
        addAll(values, node.productIterator());
        addAll(values, node.otherCopyArgs().iterator());
        if (names.length != values.size()) {
            throw new IllegalStateException("fields");  // Spark's assertion: its toJSON fails too
        }
        scala.collection.immutable.Set children = node.containsChild();
        for (int i = 0; i < names.length; i++) {
            Object value = values.get(i);
            if (value instanceof TreeNode && children.contains(value)) {
                out.writeNumberField(names[i], node.children().indexOf(value));
            } else if (value instanceof scala.collection.immutable.Seq && allIn((scala.collection.immutable.Seq) value, children)) {
                out.writeArrayFieldStart(names[i]);
                scala.collection.Iterator items = ((scala.collection.immutable.Seq) value).iterator();
                while (items.hasNext()) {
                    out.writeNumber(node.children().indexOf(items.next()));
                }
                out.writeEndArray();
            } else if (!isNothing(value)) {
                out.writeFieldName(names[i]);
                writeValue(out, node, value);
            }
        }
        out.writeEndObject();
    }

    /** TreeNode.parseToJson, in its order of cases. */
    private void writeValue(JsonGenerator out, TreeNode owner, Object value) throws Exception {
        if (value == null) {
            out.writeNull();
        } else if (value instanceof Boolean) {
            out.writeBoolean(((Boolean) value).booleanValue());
        } else if (value instanceof Byte || value instanceof Short || value instanceof Integer || value instanceof Long) {
            out.writeNumber(((Number) value).longValue());
        } else if (value instanceof String) {
            out.writeString((String) value);
        } else if (value instanceof java.util.UUID) {
            out.writeString(value.toString());
        } else if (value instanceof org.apache.spark.sql.types.DataType) {
            out.writeRawValue(((org.apache.spark.sql.types.DataType) value).json());
        } else if (value instanceof org.apache.spark.sql.types.Metadata) {
            out.writeRawValue("{}");  // Spark writes every Metadata as the empty one
        } else if (value instanceof Class) {
            out.writeString(((Class) value).getName());
        } else if (value instanceof Float || value instanceof Double || value instanceof scala.math.BigInt
                || value instanceof org.apache.spark.storage.StorageLevel) {
            out.writeRawValue(sparkJson(owner, value));
        } else if (value instanceof TreeNode) {
            writeTree(out, (TreeNode) value);
        } else if (value instanceof scala.Option) {
            writeValue(out, owner, ((scala.Option) value).get());  // isNothing skipped None
        } else if (value instanceof scala.collection.immutable.Seq) {
            writeSeq(out, owner, (scala.collection.immutable.Seq) value);
        } else if (value instanceof scala.collection.Map) {
            out.writeNull();
        } else if (value.getClass().getName().endsWith("$")) {  // a Scala object: its class
            out.writeStartObject();
            out.writeStringField("object", value.getClass().getName());
            out.writeEndObject();
        } else if (value instanceof scala.Product && shouldConvert(owner, (scala.Product) value)) {
            writeProduct(out, owner, (scala.Product) value);
        } else {
            out.writeNull();
        }
    }

    private void writeSeq(JsonGenerator out, TreeNode owner, scala.collection.immutable.Seq seq) throws Exception {
        // Spark 4's test: all partitionings, all data types or all products (nodes, lists…)
        if (allOf(seq, org.apache.spark.sql.catalyst.plans.physical.Partitioning.class)
                || allOf(seq, org.apache.spark.sql.types.DataType.class) || allOf(seq, scala.Product.class)) {
            out.writeStartArray();
            scala.collection.Iterator items = seq.iterator();
            while (items.hasNext()) {
                writeValue(out, owner, items.next());
            }
            out.writeEndArray();
        } else if (seq.length() > 0 && seq.head() instanceof String) {
            out.writeRawValue(sparkJson(owner, seq));  // truncated as SQLConf says
        } else {
            out.writeNull();
        }
    }

    private void writeProduct(JsonGenerator out, TreeNode owner, scala.Product product) throws Exception {
        String[] names = fieldNames(product.getClass());
        ArrayList values = new ArrayList();
        if (product.productArity() == names.length) {
            addAll(values, product.productIterator());
        } else {
            for (int i = 0; i < names.length; i++) {
                Field field = product.getClass().getDeclaredField(names[i]);
                field.setAccessible(true);
                values.add(field.get(product));
            }
        }
        out.writeStartObject();
        out.writeStringField("product-class", product.getClass().getName());
        for (int i = 0; i < names.length; i++) {
            if (!isNothing(values.get(i))) {
                out.writeFieldName(names[i]);
                writeValue(out, owner, values.get(i));
            }
        }
        out.writeEndObject();
    }

    /** An Option that json4s renders as nothing: its field is left out. */
    private static boolean isNothing(Object value) {
        return value instanceof scala.Option
                && (((scala.Option) value).isEmpty() || isNothing(((scala.Option) value).get()));
    }

    private static boolean allIn(scala.collection.immutable.Seq seq, scala.collection.immutable.Set set) {
        scala.collection.Iterator items = seq.iterator();
        while (items.hasNext()) {
            if (!set.contains(items.next())) {
                return false;
            }
        }
        return true;
    }

    private static boolean allOf(scala.collection.immutable.Seq seq, Class type) {
        scala.collection.Iterator items = seq.iterator();
        while (items.hasNext()) {
            if (!type.isInstance(items.next())) {
                return false;
            }
        }
        return true;
    }

    private static String[] fieldNames(Class type) {
        synchronized (FIELD_NAMES) {
            String[] names = (String[]) FIELD_NAMES.get(type);
            if (names == null) {
                scala.collection.immutable.Seq found =
                        org.apache.spark.sql.catalyst.ScalaReflection$.MODULE$.getConstructorParameterNames(type);
                names = new String[found.length()];
                for (int i = 0; i < names.length; i++) {
                    names[i] = (String) found.apply(i);
                }
                FIELD_NAMES.put(type, names);
            }
            return names;
        }
    }

    private static boolean ownsJsonFields(Class type) throws Exception {
        synchronized (OWN_JSON_FIELDS) {
            Boolean owns = (Boolean) OWN_JSON_FIELDS.get(type);
            if (owns == null) {
                owns = Boolean.valueOf(type.getMethod("jsonFields", NO_TYPES).getDeclaringClass() != TreeNode.class);
                OWN_JSON_FIELDS.put(type, owns);
            }
            return owns.booleanValue();
        }
    }

    /** Spark's own parseToJson of a value it renders without reflection, as text. */
    private static String sparkJson(TreeNode owner, Object value) throws Exception {
        if (parseToJson == null) {
            Method method = TreeNode.class.getDeclaredMethod("parseToJson", new Class[] {Object.class});
            method.setAccessible(true);
            parseToJson = method;
        }
        Object json = parseToJson.invoke(owner, new Object[] {value});
        return org.json4s.jackson.JsonMethods$.MODULE$.compact((org.json4s.JValue) json);
    }

    private static boolean shouldConvert(TreeNode owner, scala.Product product) throws Exception {
        if (shouldConvertToJson == null) {
            Method method = TreeNode.class.getDeclaredMethod("shouldConvertToJson", new Class[] {scala.Product.class});
            method.setAccessible(true);
            shouldConvertToJson = method;
        }
        return ((Boolean) shouldConvertToJson.invoke(owner, new Object[] {product})).booleanValue();
    }

    // -- what the JSON leaves null ------------------------------------------------------------

    private void collectRelations(LogicalPlan plan, ObjectNode found, List problems) {
        ArrayList pending = new ArrayList();
        pending.add(plan);
        while (!pending.isEmpty()) {
            Object item = pending.remove(pending.size() - 1);
            if (!(item instanceof LogicalPlan)) {
                continue;
            }
            LogicalPlan node = (LogicalPlan) item;
            String name = node.nodeName();
            boolean fromRdd = name.equals("LogicalRDD") || name.equals("ExternalRDD");
            if (name.equals("LogicalRelation") || name.equals("DataSourceV2Relation") || fromRdd) {
                String key = relationKey(node);
                try {
                    ObjectNode details = (ObjectNode) relations.get(key);
                    if (details == null) {
                        if (fromRdd) {
                            details = rddSources((org.apache.spark.rdd.RDD) call(node, "rdd"));
                        } else if (name.equals("LogicalRelation")) {
                            details = relation((LogicalRelation) node);
                        } else {
                            details = v2Relation(node);
                        }
                        if (relations.size() >= RELATION_CACHE_LIMIT) {
                            relations.clear();
                        }
                        relations.put(key, details);
                    }
                    found.set(key, details);
                } catch (Throwable error) {
                    problems.add("relation " + error.getClass().getName());
                }
            }
            addAll(pending, node.children().iterator());
            addAll(pending, node.innerChildren().iterator());
            addAll(pending, node.subqueries().iterator());
        }
    }

    private static String relationKey(LogicalPlan node) {
        StringBuilder key = new StringBuilder();
        scala.collection.Iterator output = node.output().iterator();
        while (output.hasNext()) {
            if (key.length() > 0) {
                key.append(',');
            }
            key.append(((org.apache.spark.sql.catalyst.expressions.Attribute) output.next()).exprId().id());
        }
        return key.toString();
    }

    private ObjectNode relation(LogicalRelation node) {
        ObjectNode details = mapper.createObjectNode();
        BaseRelation relation = node.relation();
        if (relation instanceof HadoopFsRelation) {
            HadoopFsRelation files = (HadoopFsRelation) relation;
            details.put("type", "files");
            details.put("format", files.toString());  // a HadoopFsRelation prints as its format's name
            details.put("paths", files.location().rootPaths().mkString("\n"));
        } else if (relation instanceof JDBCRelation) {
            JDBCRelation jdbc = (JDBCRelation) relation;
            details.put("type", "jdbc");
            details.put("url", jdbc.jdbcOptions().url());
            details.put("table", jdbc.jdbcOptions().tableOrQuery());
        } else {
            details.put("type", "other");
            details.put("class", relation.getClass().getName());
        }
        return details;
    }

    /** A DataSource V2 table: Spark's own file tables by their paths, any other by its name. */
    private ObjectNode v2Relation(LogicalPlan node) throws Exception {
        Object table = call(node, "table");
        ObjectNode details = mapper.createObjectNode();
        details.put("type", "v2");
        details.put("class", table.getClass().getName());
        details.put("name", String.valueOf(call(table, "name")));
        if (table.getClass().getName().indexOf(".datasources.v2.") >= 0) {
            try {
                details.put("paths", ((scala.collection.Seq) call(table, "paths")).mkString("\n"));
                details.put("format", String.valueOf(call(table, "formatName")).toLowerCase());
                details.put("type", "files");
            } catch (Throwable notFileTable) {
                // keep its name
            }
        }
        return details;
    }

    // -- RDDs ----------------------------------------------------------------------------------

    /** An RDD action of PySpark (saveAsTextFile, collect, count…), which no
     * QueryExecutionListener hears of: what it wrote (`path`, empty for an action that writes
     * nothing) and the sources of its RDD's lineage, one line. */
    public synchronized void rddAction(
            String funcName, String path, String format, Object rdd, long durationNs, String errorClass) {
        if (closed) {
            return;
        }
        long started = System.nanoTime();
        try {
            if (errorClass.length() > 0) {
                ObjectNode line = mapper.createObjectNode();
                line.put("kind", "failure");
                line.put("func", funcName);
                line.put("at_ms", System.currentTimeMillis());
                line.put("error_class", errorClass);
                write(mapper.writeValueAsString(line) + "\n");
                return;
            }
            ObjectNode line = mapper.createObjectNode();
            line.put("kind", "rdd_action");
            line.put("func", funcName);
            line.put("at_ms", System.currentTimeMillis());
            line.put("duration_ns", durationNs);
            line.put("path", path);
            line.put("format", format);
            line.set("rdd", rddSources((org.apache.spark.rdd.RDD) rdd));
            line.put("capture_ns", System.nanoTime() - started);
            write(mapper.writeValueAsString(line) + "\n");
        } catch (Throwable error) {
            report("error", funcName, error);
        }
    }

    /** `df.rdd`: the RDD with id `rddId` holds `dataset`'s rows. Journalled as the DataFrame's
     * analyzed plan and relations, so that an RDD written from it names the DataFrame's sources. */
    public synchronized void rddOrigin(org.apache.spark.sql.Dataset dataset, int rddId) {
        if (closed) {
            return;
        }
        long started = System.nanoTime();
        try {
            LogicalPlan plan = dataset.queryExecution().analyzed();
            List problems = new ArrayList();
            ObjectNode found = mapper.createObjectNode();
            collectRelations(plan, found, problems);
            ObjectNode line = mapper.createObjectNode();
            line.put("kind", "rdd_origin");
            line.put("func", "rdd");
            line.put("at_ms", System.currentTimeMillis());
            line.put("rdd_id", rddId);
            line.set("relations", found);
            writeWithPlan(line, problems, started, planJson(plan, problems));
        } catch (Throwable error) {
            report("error", "rdd", error);
        }
    }

    /** The Hadoop inputs an RDD reads (textFile, hadoopFile, …: Spark names such an RDD by its
     * path) and the ids of all its ancestors, walked through its dependencies. */
    private ObjectNode rddSources(org.apache.spark.rdd.RDD rdd) {
        ObjectNode details = mapper.createObjectNode();
        StringBuilder sources = new StringBuilder();
        StringBuilder ancestors = new StringBuilder();
        Set seen = new HashSet();
        ArrayList pending = new ArrayList();
        pending.add(rdd);
        while (!pending.isEmpty() && seen.size() < RDD_WALK_LIMIT) {
            org.apache.spark.rdd.RDD next = (org.apache.spark.rdd.RDD) pending.remove(pending.size() - 1);
            if (!seen.add(Integer.valueOf(next.id()))) {
                continue;
            }
            if (ancestors.length() > 0) {
                ancestors.append(',');
            }
            ancestors.append(next.id());
            if (next instanceof org.apache.spark.rdd.HadoopRDD || next instanceof org.apache.spark.rdd.NewHadoopRDD) {
                scala.Option scope = next.scope();
                String made = scope.isDefined() ? ((org.apache.spark.rdd.RDDOperationScope) scope.get()).name() : "";
                if (sources.length() > 0) {
                    sources.append('\n');
                }
                sources.append(made).append('\t').append(inputPaths(next));
            }
            scala.collection.Iterator dependencies = next.dependencies().iterator();
            while (dependencies.hasNext()) {
                pending.add(((org.apache.spark.Dependency) dependencies.next()).rdd());
            }
        }
        details.put("type", "rdd");
        details.put("sources", sources.toString());
        details.put("ancestors", ancestors.toString());
        details.put("complete", pending.isEmpty() ? "true" : "false");
        return details;
    }

    /** A Hadoop RDD's input paths, comma-separated: as its configuration gives them to the
     * input format, else the name Spark gave the RDD (its path, for most). */
    private static String inputPaths(org.apache.spark.rdd.RDD rdd) {
        try {
            Object conf = rdd instanceof org.apache.spark.rdd.HadoopRDD ? call(rdd, "getJobConf") : call(rdd, "getConf");
            String paths = ((org.apache.hadoop.conf.Configuration) conf).get(INPUT_DIRS);
            if (paths != null && paths.length() > 0) {
                return paths;
            }
        } catch (Throwable noConf) {
            // its name, then
        }
        return String.valueOf(rdd.name());
    }

    /** The table a DDL command changed, as the catalog has it now the command has run: its
     * schema (none once dropped). */
    private ObjectNode tableAfter(LogicalPlan plan, QueryExecution qe, List problems) {
        ObjectNode details = mapper.createObjectNode();
        try {
            if (plan.nodeName().equals("DropTable")) {
                // a V2 command: its table is a ResolvedIdentifier, which the plan's JSON leaves null
                Object resolved = call(plan, "child");
                Object identifier = callIfAny(resolved, "identifier");
                if (identifier instanceof org.apache.spark.sql.connector.catalog.Identifier) {
                    // by the public interface: the implementing classes are not public
                    org.apache.spark.sql.connector.catalog.Identifier table =
                            (org.apache.spark.sql.connector.catalog.Identifier) identifier;
                    String[] namespace = table.namespace();
                    details.put("table", table.name());
                    if (namespace.length > 0) {
                        details.put("database", namespace[namespace.length - 1]);
                    }
                    Object catalog = callIfAny(resolved, "catalog");
                    if (catalog instanceof org.apache.spark.sql.connector.catalog.CatalogPlugin) {
                        details.put("catalog", ((org.apache.spark.sql.connector.catalog.CatalogPlugin) catalog).name());
                    }
                }
                return details;
            }
            Object named = callIfAny(plan, "newName");
            if (named == null) {
                named = callIfAny(plan, "tableName");
            }
            if (named == null) {
                named = callIfAny(plan, "table");
            }
            if (named == null) {
                named = callIfAny(plan, "targetTable");
            }
            if (named instanceof org.apache.spark.sql.catalyst.catalog.CatalogTable) {
                named = ((org.apache.spark.sql.catalyst.catalog.CatalogTable) named).identifier();
            }
            if (named instanceof org.apache.spark.sql.catalyst.TableIdentifier) {
                Object catalog = call(call(call(qe, "sparkSession"), "sessionState"), "catalog");
                org.apache.spark.sql.catalyst.catalog.SessionCatalog tables =
                        (org.apache.spark.sql.catalyst.catalog.SessionCatalog) catalog;
                org.apache.spark.sql.catalyst.TableIdentifier id = (org.apache.spark.sql.catalyst.TableIdentifier) named;
                if (tables.tableExists(id)) {
                    details.put("schema", tables.getTableMetadata(id).schema().json());
                }
            }
        } catch (Throwable error) {
            problems.add("lifecycle " + error.getClass().getName());
        }
        return details;
    }

    /** A write command's target and manner, by what the command offers (each one its own fields). */
    private ObjectNode writeTarget(LogicalPlan plan, List problems) {
        ObjectNode details = mapper.createObjectNode();
        if (!writeCommands.contains(plan.nodeName())) {
            return details;
        }
        try {
            Object mode = callIfAny(plan, "mode");
            if (mode != null) {
                details.put("mode", mode.toString());
            }
            Object query = callIfAny(plan, "query");
            if (query instanceof LogicalPlan) {
                details.put("schema", ((LogicalPlan) query).schema().json());
            }
            Object path = callIfAny(plan, "outputPath");
            Object storage = callIfAny(plan, "storage");  // a directory's: INSERT OVERWRITE DIRECTORY
            if (path == null && storage != null) {
                scala.Option location = (scala.Option) callIfAny(storage, "locationUri");
                path = location != null && location.isDefined() ? location.get() : null;
            }
            if (path != null) {
                details.put("path", path.toString());
            }
            Object format = callIfAny(plan, "fileFormat");
            Object source = callIfAny(plan, "dataSource");
            if (source != null) {
                details.put("provider", source.getClass().getName());
                format = source;
            }
            if (format != null) {
                details.put("format", shortName(format));
            }
            Object options = callIfAny(plan, "options");
            if (source != null && options instanceof scala.collection.Map) {
                // only the options that name the target; credentials are never read
                String[] keys = {"url", "dbtable", "path"};
                for (int i = 0; i < keys.length; i++) {
                    scala.Option value = ((scala.collection.Map) options).get(keys[i]);
                    if (value.isDefined()) {
                        details.put(keys[i], String.valueOf(value.get()));
                    }
                }
            }
        } catch (Throwable error) {
            problems.add("write " + error.getClass().getName());
        }
        return details;
    }

    private static String shortName(Object format) {
        if (format instanceof org.apache.spark.sql.sources.DataSourceRegister) {
            return ((org.apache.spark.sql.sources.DataSourceRegister) format).shortName();
        }
        return format.toString().toLowerCase();  // a format that is no DataSourceRegister
    }

    // -- the journal ---------------------------------------------------------------------------

    private void report(String kind, String funcName, Throwable error) {
        try {
            ObjectNode line = mapper.createObjectNode();
            line.put("kind", kind);
            line.put("func", funcName);
            line.put("at_ms", System.currentTimeMillis());
            line.put("error_class", error == null ? "" : error.getClass().getName());
            write(mapper.writeValueAsString(line) + "\n");
        } catch (Throwable ignored) {
            // the journal itself failing: Python sees the action missing, nothing more to do here
        }
    }

    /** A line with its problems, the time capturing it took (since `started`) and the plan's
     * JSON, which is JSON already: spliced in as text rather than parsed and written again. */
    private void writeWithPlan(ObjectNode line, List problems, long started, String planJson)
            throws java.io.IOException {
        write(lineWithPlan(line, problems, started, planJson));
    }

    private String lineWithPlan(ObjectNode line, List problems, long started, String planJson)
            throws java.io.IOException {
        ArrayNode listed = line.putArray("problems");
        for (int i = 0; i < problems.size(); i++) {
            listed.add((String) problems.get(i));
        }
        line.put("capture_ns", System.nanoTime() - started);
        String text = mapper.writeValueAsString(line);
        return text.substring(0, text.length() - 1) + ",\"plan\":" + planJson + "}\n";
    }

    /** One whole line a write call; a segment full is closed before the next is made, so Python
     * may read a segment to its end once the next one exists. */
    private void write(String line) throws java.io.IOException {
        byte[] bytes = line.getBytes(StandardCharsets.UTF_8);
        if (written > 0 && written + bytes.length > segmentBytes) {
            out.close();
            segment += 1;
            written = 0;
            out = new FileOutputStream(segmentFile(segment), true);
        }
        out.write(bytes);
        written += bytes.length;
    }

    private File segmentFile(int index) {
        return new File(directory, String.format("capture-%06d.jsonl", new Object[] {Integer.valueOf(index)}));
    }

    // -- small helpers -------------------------------------------------------------------------

    private static Object call(Object target, String method) throws Exception {
        return target.getClass().getMethod(method, NO_TYPES).invoke(target, NO_ARGS);
    }

    private static Object callIfAny(Object target, String method) throws Exception {
        Method found;
        try {
            found = target.getClass().getMethod(method, NO_TYPES);
        } catch (NoSuchMethodException absent) {
            return null;
        }
        return found.invoke(target, NO_ARGS);
    }

    private static void addAll(Set set, String joined) {
        String[] parts = joined.split(",");
        for (int i = 0; i < parts.length; i++) {
            if (parts[i].length() > 0) {
                set.add(parts[i]);
            }
        }
    }

    private static void addAll(List list, scala.collection.Iterator items) {
        while (items.hasNext()) {
            list.add(items.next());
        }
    }
}
