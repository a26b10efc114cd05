//! Provider-defined functions at the protocol level (6.5: GetFunctions, CallFunction, and the
//! `functions` of GetProviderSchema and GetMetadata), against the real binary over AutoMTLS.

mod support;

use talosboot::functions::cilium_talos_values::values_type;
use talosboot::protocol::proto as pb;
use talosboot::values::{Type, Value, from_msgpack, to_msgpack};
use tonic::transport::Channel;

use support::ProviderProcess;

type Client = pb::provider_client::ProviderClient<Channel>;

const NAME: &str = "cilium_talos_values";

fn string_arg(value: Value) -> pb::DynamicValue {
    pb::DynamicValue {
        msgpack: to_msgpack(&value, &Type::String).expect("encode"),
        json: Vec::new(),
    }
}

async fn call(client: &mut Client, name: &str, args: Vec<Value>) -> pb::call_function::Response {
    client
        .call_function(pb::call_function::Request {
            name: name.to_owned(),
            arguments: args.into_iter().map(string_arg).collect(),
        })
        .await
        .expect("CallFunction")
        .into_inner()
}

#[tokio::test]
async fn functions_are_declared_in_schema_metadata_and_get_functions() {
    let provider = ProviderProcess::start().await.expect("provider starts");
    let mut client = provider.provider_client();
    let schema = client
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .expect("schema")
        .into_inner();
    let f = &schema.functions[NAME];
    assert_eq!(f.parameters.len(), 1);
    assert_eq!(f.parameters[0].name, "api_endpoint");
    assert_eq!(f.parameters[0].r#type, b"\"string\"");
    assert!(f.parameters[0].allow_null_value);
    assert!(!f.parameters[0].allow_unknown_values);
    let ret = Type::from_json_bytes(&f.r#return.as_ref().expect("return").r#type).expect("type");
    assert_eq!(ret, values_type());
    assert!(!f.summary.is_empty());
    assert!(f.description.contains("helm_release"), "{}", f.description);
    assert!(f.parameters[0].description.contains("KubePrism"));

    let listed = client
        .get_functions(pb::get_functions::Request {})
        .await
        .expect("GetFunctions")
        .into_inner();
    assert_eq!(listed.functions.get(NAME), Some(f));
    let meta = client
        .get_metadata(pb::get_metadata::Request {})
        .await
        .expect("metadata")
        .into_inner();
    assert!(meta.functions.iter().any(|m| m.name == NAME));
}

#[tokio::test]
async fn call_function_returns_values_and_blames_bad_arguments() {
    let provider = ProviderProcess::start().await.expect("provider starts");
    let mut client = provider.provider_client();

    let ok = call(&mut client, NAME, vec!["10.5.0.2:6443".into()]).await;
    assert_eq!(ok.error, None);
    let values =
        from_msgpack(&ok.result.expect("a result").msgpack, &values_type()).expect("decode");
    assert_eq!(
        values.attr("k8sServiceHost"),
        Some(&Value::from("10.5.0.2"))
    );
    assert_eq!(values.attr("k8sServicePort"), Some(&Value::int(6443)));
    assert_eq!(
        values.attr("kubeProxyReplacement"),
        Some(&Value::Bool(true))
    );

    let null = call(&mut client, NAME, vec![Value::Null]).await;
    let values =
        from_msgpack(&null.result.expect("a result").msgpack, &values_type()).expect("decode");
    assert_eq!(values.attr("k8sServicePort"), Some(&Value::int(7445)));

    let bad = call(&mut client, NAME, vec!["10.5.0.2".into()]).await;
    let error = bad.error.expect("an error");
    assert!(bad.result.is_none());
    assert_eq!(error.function_argument, Some(0));
    assert!(error.text.contains("expected host:port"), "{}", error.text);

    let unknown = call(&mut client, NAME, vec![Value::unknown()]).await;
    assert_eq!(unknown.error.expect("an error").function_argument, Some(0));

    let surplus = call(&mut client, NAME, vec!["a:1".into(), "b:2".into()]).await;
    let error = surplus.error.expect("an error");
    assert_eq!(error.function_argument, None);
    assert!(
        error.text.contains("takes 1 argument(s), got 2"),
        "{}",
        error.text
    );

    let missing = call(&mut client, "no_such_function", vec![]).await;
    assert!(
        missing
            .error
            .expect("an error")
            .text
            .contains("no function named \"no_such_function\""),
    );

    let garbage = client
        .call_function(pb::call_function::Request {
            name: NAME.to_owned(),
            arguments: vec![pb::DynamicValue {
                msgpack: vec![0xc1],
                json: Vec::new(),
            }],
        })
        .await
        .expect("CallFunction")
        .into_inner();
    assert_eq!(garbage.error.expect("an error").function_argument, Some(0));
}
